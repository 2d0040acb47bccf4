"""File kinds: recognises what a YAML file declares (workflow, triggers, connectors, queues) by its shape or
its optional `kind:` field (alert rules, notification channels and approver groups by their `kind:` alone), and validates each
declared object against its model.

A file is one mapping (one object) or a list of objects of one kind; a workflow is always alone in its file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ..diagnostics import Diagnostic, register
from .models import TRIGGER_MODELS, ConnectorDecl, Queue, Workflow
from .models.approvals import ApproverGroup
from .models.connectors import DECLARABLE_TYPES
from .models.monitoring import CHANNEL_MODELS, AlertRule
from .salvage import salvage
from .source import Path, SourceFile
from .validation import A44101, did_you_mean, validate, yaml_type

A44010 = register("A44010", "file kind cannot be recognised")
A44011 = register("A44011", "a workflow file holds exactly one workflow")
A44012 = register("A44012", "objects of different kinds in one file")
A44013 = register("A44013", "unknown trigger type")
A44014 = register("A44014", "unknown notification channel type")
# In the step rules' range, registered here because the count is checked before the steps are validated.
A44204 = register("A44204", "workflow has too many steps")

# Generous: compiling is linear in steps (14,000 take about a second); the cap bounds what one published
# definition costs the daemon to compile, store and load.
MAX_STEPS = 15_000

KINDS = ("workflow", "trigger", "connector", "queue", "alert", "channel", "approvers")
_KIND_ALIASES = {k: k for k in KINDS}
_SHAPES_HINT = ("a workflow is a mapping with name, version and steps; triggers, connectors and queues are "
                "mappings (or lists of them) with id and type/maxConcurrency; add `kind:` to say which")


M = TypeVar("M", bound=BaseModel | None, covariant=True)


@dataclass
class Decl(Generic[M]):
    """One declared object: its kind, validated model, file and path within the file.

    A declaration that failed its model carries the model of its salvaged part (`salvaged`, for the rules
    only; None when nothing could be salvaged) and the paths of the stand-ins put in (`stand_ins`)."""

    kind: str
    model: M          # None when nothing could be salvaged: `Project.of_kind` leaves those out
    src: SourceFile
    path: Path
    data: Any
    salvaged: bool = False
    stand_ins: frozenset[Path] = field(default_factory=frozenset)

    def written(self, *path: str | int) -> Any:
        """The value as written at `path` below this object (None when absent): what the salvage may have set
        aside still counts as given, so a rule does not report a wrong value a second time as missing."""
        cur = self.data
        for p in path:
            if isinstance(cur, dict) and isinstance(p, str):
                cur = cur.get(p)
            elif isinstance(cur, list) and isinstance(p, int) and 0 <= p < len(cur):
                cur = cur[p]
            else:
                return None
        return cur

    @property
    def named(self) -> bool:
        """Its name or id is its own (not a stand-in): it may be indexed and referenced across files."""
        return not (self.stand_ins & {("name",), ("id",)})


@dataclass(frozen=True)
class Clue:
    """One sign of a kind in an object's shape: every key of `keys` is present and, when `field` is set, that
    field is a string in `one_of` or starting with `prefix`. Data, so the editor schema (compiler/jsonschema.py)
    discriminates the kinds by the same signs as lint."""

    keys: tuple[str, ...] = ()
    field: str | None = None
    one_of: tuple[str, ...] = ()
    prefix: str | None = None

    def seen_in(self, data: dict[str, Any]) -> bool:
        if not all(key in data for key in self.keys):
            return False
        if self.field is None:
            return True
        value = data.get(self.field)  # `type: [..]` is a shape error of the model, not a kind
        if not isinstance(value, str):
            return False
        return value in self.one_of if self.one_of else self.prefix is not None and value.startswith(self.prefix)


# By precedence: the first kind with a clue present wins (an explicit `kind:` before all of them).
SHAPES: tuple[tuple[str, tuple[Clue, ...]], ...] = (
    ("workflow", (Clue(("steps",)), Clue(("name", "version")))),
    ("trigger", (Clue(field="type", one_of=tuple(TRIGGER_MODELS)), Clue(("cron",)), Clue(("event",)),
                 Clue(("workflow",)))),
    ("connector", (Clue(field="type", one_of=tuple(DECLARABLE_TYPES)), Clue(("baseUrl",)),
                   Clue(field="id", prefix="con_"))),
    ("queue", (Clue(("maxConcurrency",)), Clue(("ordering",)), Clue(field="id", prefix="q_"))),
)


def classify(data: Any) -> str | None:
    """The kind of one object by its shape, or None."""
    if not isinstance(data, dict):
        return None
    explicit = data.get("kind")
    if isinstance(explicit, str) and explicit in _KIND_ALIASES:
        return _KIND_ALIASES[explicit]
    return next((kind for kind, clues in SHAPES if any(clue.seen_in(data) for clue in clues)), None)


def declarations(src: SourceFile) -> list[Decl[BaseModel | None]]:
    """Validate every object of a parsed file; diagnostics go to `src.diagnostics`."""
    data = src.data
    items: list[tuple[Path, Any]]
    if isinstance(data, list):
        items = [((i,), item) for i, item in enumerate(data)]
        if not items:
            src.error(A44010, "the file is an empty list; nothing is declared", src.span(()), hint=_SHAPES_HINT)
            return []
    else:
        items = [((), data)]
    kinds = [classify(item) for _, item in items]
    if isinstance(data, dict) and isinstance(data.get("kind"), str) and data["kind"] not in _KIND_ALIASES:
        src.error(A44010, f"unknown kind {data['kind']!r}; expected one of: {', '.join(KINDS)}",
                  src.span(("kind",)), hint=did_you_mean(data["kind"], _KIND_ALIASES))
        return []
    known = [k for k in kinds if k]
    if not known:
        what = yaml_type(data) if not isinstance(data, (dict, list)) else "this file"
        src.error(A44010, f"cannot tell what {what} declares", src.span(()), hint=_SHAPES_HINT)
        return []
    if isinstance(data, list) and "workflow" in known:
        src.error(A44011, "a workflow must be the only object in its file, as a mapping (not a list item)",
                  src.span((kinds.index("workflow"),)), hint="one workflow per file; remove the leading '-'")
        return []
    main_kind = known[0]
    out: list[Decl[BaseModel | None]] = []
    for (path, item), kind in zip(items, kinds):
        if kind is None:
            kind = main_kind
        if kind != main_kind:
            src.error(A44012, f"this {kind} sits in a file of {main_kind}s; keep one kind per file",
                      src.span(path), hint="move it to its own file")
            continue
        model_cls = _model_for(src, kind, item, path)
        if kind == "workflow" and _too_many_steps(src, item, path):
            model_cls = None
        if model_cls is None:
            out.append(Decl(kind, None, src, path, item))
            continue
        model, diags = validate(src, model_cls, item, base=path)
        src.diagnostics.extend(diags)
        if model is None:
            model, stand_ins = salvage(model_cls, item, kind)
            out.append(Decl(kind, model, src, path, item, salvaged=True, stand_ins=stand_ins))
            continue
        out.append(Decl(kind, model, src, path, item))
    return out


def _too_many_steps(src: SourceFile, item: Any, path: Path) -> bool:
    steps = item.get("steps") if isinstance(item, dict) else None
    if not isinstance(steps, list) or len(steps) <= MAX_STEPS:
        return False
    src.error(A44204, f"workflow has {len(steps):,} steps; at most {MAX_STEPS:,} are allowed",
              src.span(path + ("steps",), key=True), hint="split it into workflows that trigger one another")
    return True


def _model_for(src: SourceFile, kind: str, item: Any, path: Path) -> type[BaseModel] | None:
    if kind == "workflow":
        return Workflow
    if kind == "connector":
        return ConnectorDecl
    if kind == "queue":
        return Queue
    if kind == "alert":
        return AlertRule
    if kind == "approvers":
        return ApproverGroup
    if kind == "channel":
        typ = item.get("type") if isinstance(item, dict) else None
        if not isinstance(typ, str) or typ not in CHANNEL_MODELS:
            src.error(A44014, f"unknown channel type {typ!r}; expected one of: {', '.join(CHANNEL_MODELS)}",
                      src.span(path + ("type",)) if isinstance(item, dict) and "type" in item else src.span(path),
                      hint=did_you_mean(str(typ), CHANNEL_MODELS) if isinstance(typ, str) else None)
            return None
        return CHANNEL_MODELS[typ]
    if not isinstance(item, dict):
        src.error(A44010, f"a trigger must be a mapping, got {yaml_type(item)}", src.span(path))
        return None
    typ = item.get("type")
    if typ is None:
        guess = "schedule" if "cron" in item else "event" if "event" in item else None
        src.error(A44013, "trigger has no 'type'; expected one of: " + ", ".join(TRIGGER_MODELS),
                  src.span(path, key=False), hint=f"add `type: {guess}`" if guess else None)
        return None
    if not isinstance(typ, str) or typ not in TRIGGER_MODELS:
        src.error(A44013, f"unknown trigger type {typ!r}; expected one of: {', '.join(TRIGGER_MODELS)}",
                  src.span(path + ("type",)), hint=did_you_mean(str(typ), TRIGGER_MODELS))
        return None
    return TRIGGER_MODELS[typ]


__all__ = ["A44101", "Decl", "KINDS", "classify", "declarations", "Diagnostic"]
