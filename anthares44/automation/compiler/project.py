"""The set of files compiled together: every declaration indexed by id, plus what the machine knows
(installed connector plugins), so rules can settle references across files.

`mode` is "lint" or "publish": a reference the linted files cannot settle (a plugin not installed here, a
workflow declared in another repo) is a warning in lint and an error at publish.

`known` is what exists beside these files: at publish, the project's published queues, workflows and declared
connectors (looked up in the store by the caller; the compiler never opens a connection).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .documents import Decl
from .source import SourceFile

PLUGIN_GROUP = "anthares44.automation.connectors"


def workflow_id(name: str) -> str:
    """`invoice-settle` -> `wf_invoice_settle` (§3)."""
    return "wf_" + name.replace("-", "_")


@dataclass(frozen=True)
class Known:
    """Objects that exist outside the compiled files, and where (for messages: "published in project pj_x")."""

    where: str = ""
    workflows: frozenset = frozenset()
    queues: frozenset = frozenset()
    connectors: dict = field(default_factory=dict)     # connector id -> validated ConnectorDecl
    plugins: frozenset = frozenset()   # plugin names that exist without an entry point here: the test kit's mocks


@dataclass
class Project:
    sources: list[SourceFile]
    decls: list[Decl]
    mode: str = "lint"
    known: Known = field(default_factory=Known)

    def connector_model(self, uses: str):
        """The declared connector `uses` names (these files first, then the known ones), or None."""
        decl = self.connectors.get(uses)
        return decl.model if decl is not None else self.known.connectors.get(uses)

    def of_kind(self, kind: str) -> list[Decl]:
        return [d for d in self.decls if d.kind == kind and d.model is not None]

    @cached_property
    def workflows(self) -> dict[str, Decl]:
        return {workflow_id(d.model.name): d for d in self.of_kind("workflow") if d.named}

    @cached_property
    def triggers(self) -> dict[str, Decl]:
        return {d.model.id: d for d in self.of_kind("trigger")}

    @cached_property
    def connectors(self) -> dict[str, Decl]:
        return {d.model.id: d for d in self.of_kind("connector")}

    @cached_property
    def queues(self) -> dict[str, Decl]:
        return {d.model.id: d for d in self.of_kind("queue")}

    @cached_property
    def alerts(self) -> dict[str, Decl]:
        return {d.model.name: d for d in self.of_kind("alert")}

    @cached_property
    def channels(self) -> dict[str, Decl]:
        return {d.model.id: d for d in self.of_kind("channel")}

    @cached_property
    def plugins(self) -> dict[str, object]:
        """Installed connector plugins by name (entry points; loaded only when their params are checked), and the
        known ones without a model (None)."""
        from importlib.metadata import entry_points

        return {**dict.fromkeys(self.known.plugins), **{ep.name: ep for ep in entry_points(group=PLUGIN_GROUP)}}
