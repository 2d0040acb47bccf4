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
from importlib.metadata import EntryPoint
from typing import Any, Literal, TypeAlias, overload

from pydantic import BaseModel

from .documents import Decl
from .models import ConnectorDecl, Queue, Workflow
from .models.approvals import ApproverGroup
from .models.monitoring import AlertRule, EmailChannel, SlackChannel, WebhookChannel
from .models.triggers import EventTrigger, ManualTrigger, ScheduleTrigger, WebhookTrigger
from .source import SourceFile

Trigger: TypeAlias = EventTrigger | WebhookTrigger | ScheduleTrigger | ManualTrigger
Channel: TypeAlias = WebhookChannel | SlackChannel | EmailChannel

PLUGIN_GROUP = "anthares44.automation.connectors"


def workflow_id(name: str) -> str:
    """`invoice-settle` -> `wf_invoice_settle` (§3)."""
    return "wf_" + name.replace("-", "_")


@dataclass(frozen=True)
class Known:
    """Objects that exist outside the compiled files, and where (for messages: "published in project pj_x")."""

    where: str = ""
    workflows: frozenset[str] = frozenset()
    queues: frozenset[str] = frozenset()
    connectors: dict[str, ConnectorDecl] = field(default_factory=dict)     # connector id -> validated ConnectorDecl
    approver_groups: dict[str, int] = field(default_factory=dict)  # published approver group -> its member count
    plugins: frozenset[str] = frozenset()   # plugin names that exist without an entry point here: the test kit's mocks
    versions: dict[str, int] = field(default_factory=dict)     # workflow id -> latest published version (§21 pins)


@dataclass
class Project:
    sources: list[SourceFile]
    decls: list[Decl[BaseModel | None]]
    mode: str = "lint"
    known: Known = field(default_factory=Known)

    def connector_model(self, uses: str) -> ConnectorDecl | None:
        """The declared connector `uses` names (these files first, then the known ones), or None."""
        decl = self.connectors.get(uses)
        return decl.model if decl is not None else self.known.connectors.get(uses)

    # each kind's model (documents.py validates against it); a declaration of a kind always carries that model
    @overload
    def of_kind(self, kind: Literal["workflow"]) -> list[Decl[Workflow]]: ...
    @overload
    def of_kind(self, kind: Literal["trigger"]) -> list[Decl[Trigger]]: ...
    @overload
    def of_kind(self, kind: Literal["connector"]) -> list[Decl[ConnectorDecl]]: ...
    @overload
    def of_kind(self, kind: Literal["queue"]) -> list[Decl[Queue]]: ...
    @overload
    def of_kind(self, kind: Literal["alert"]) -> list[Decl[AlertRule]]: ...
    @overload
    def of_kind(self, kind: Literal["channel"]) -> list[Decl[Channel]]: ...
    @overload
    def of_kind(self, kind: Literal["approvers"]) -> list[Decl[ApproverGroup]]: ...
    @overload
    def of_kind(self, kind: str) -> list[Decl[Any]]: ...   # a kind named at run time: any of the above
    def of_kind(self, kind: str) -> list[Decl[Any]]:
        return [d for d in self.decls if d.kind == kind and d.model is not None]

    @cached_property
    def workflows(self) -> dict[str, Decl[Workflow]]:
        return {workflow_id(d.model.name): d for d in self.of_kind("workflow") if d.named}

    @cached_property
    def triggers(self) -> dict[str, Decl[Trigger]]:
        return {d.model.id: d for d in self.of_kind("trigger")}

    @cached_property
    def connectors(self) -> dict[str, Decl[ConnectorDecl]]:
        return {d.model.id: d for d in self.of_kind("connector")}

    @cached_property
    def queues(self) -> dict[str, Decl[Queue]]:
        return {d.model.id: d for d in self.of_kind("queue")}

    @cached_property
    def alerts(self) -> dict[str, Decl[AlertRule]]:
        return {d.model.name: d for d in self.of_kind("alert")}

    @cached_property
    def channels(self) -> dict[str, Decl[Channel]]:
        return {d.model.id: d for d in self.of_kind("channel")}

    @cached_property
    def approver_groups(self) -> dict[str, Decl[ApproverGroup]]:
        return {d.model.name: d for d in self.of_kind("approvers") if d.named}

    @cached_property
    def plugins(self) -> dict[str, EntryPoint | None]:
        """Installed connector plugins by name (entry points; loaded only when their params are checked), and the
        known ones without a model (None)."""
        from importlib.metadata import entry_points

        return {**dict.fromkeys(self.known.plugins), **{ep.name: ep for ep in entry_points(group=PLUGIN_GROUP)}}
