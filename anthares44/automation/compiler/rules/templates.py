"""Template rules (§3.7): every `{{ ... }}` string compiles in a sandboxed Jinja2 environment with
StrictUndefined and references only known roots (`input`, `steps` of earlier steps, `trigger`, `run`, and
`partition` in a fan-out step).

Templates are compiled again at publish time by the lowering, from the same environment (`templating.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Any

from ...diagnostics import Diagnostic, register
from ..graph import predecessors
from ..templating import is_template, template_issues
from .connectors import STEP_KEYS

if TYPE_CHECKING:
    from ..models.workflow import Partitions
    from ..project import Project
    from ..source import Path, SourceFile

A44400 = register("A44400", "template syntax error")
A44401 = register("A44401", "template references an unknown name")
A44402 = register("A44402", "template references an unknown or later step")

STEP_ROOTS = {"input", "steps", "trigger", "run"}
PARTITION_ROOTS = {"input", "trigger"}
EVENT_ROOTS = {"data", "id", "type", "idempotency_key", "partition_key", "occurred_at"}
_CODES = {"syntax": A44400, "root": A44401, "step": A44402}


def _strings(value: Any, path: Path) -> Iterator[tuple[Path, str]]:
    """Every string leaf under `value` with its path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, path + (i,))


def _check_string(src: SourceFile, path: Path, text: str, roots: set[str],
                  step_ids: Collection[str] | None) -> Iterator[Diagnostic]:
    for kind, message, offset, length, hint in template_issues(text, roots, step_ids):
        yield Diagnostic.at(_CODES[kind], message, src.path, src.scalar_span(path, offset, length), hint=hint)


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        wf, src = decl.model, decl.src
        before = predecessors(wf)
        if wf.concurrency and not isinstance(wf.concurrency, list) and wf.concurrency.partitionKey:
            yield from _check_string(src, decl.path + ("concurrency", "partitionKey"), wf.concurrency.partitionKey,
                                     PARTITION_ROOTS, set())
        steps_data = decl.data.get("steps", [])
        for i, step in enumerate(wf.steps):
            raw = steps_data[i] if i < len(steps_data) and isinstance(steps_data[i], dict) else {}
            base = decl.path + ("steps", i)
            until = getattr(step.sleep, "until", None)
            if until is not None and is_template(until):   # the instant a sleep ends at (§19)
                yield from _check_string(src, base + ("sleep", "until"), until, STEP_ROOTS, before[step.id])
            for key, value in raw.items():
                if key in STEP_KEYS - {"with", "compensate"}:
                    continue
                if key == "query" and step.uses in ("sql/execute",):
                    continue  # SQL text is never templated: rules/sql.py says why
                for path, text in _strings(value, base + (key,)):
                    if key == "compensate" and path[-1] in ("uses", "timeout"):
                        continue
                    if is_template(text):
                        roots = STEP_ROOTS if step.partitions is None else STEP_ROOTS | _fan_out_roots(step.partitions)
                        yield from _check_string(src, path, text, roots, before[step.id].including(step.id)
                                                 if key == "compensate" else before[step.id])
    for decl in project.of_kind("trigger"):
        pk = getattr(decl.model, "partitionKey", None)
        if pk:
            yield from _check_string(decl.src, decl.path + ("partitionKey",), pk, EVENT_ROOTS, set())


def _fan_out_roots(p: Partitions) -> set[str]:
    """A fan-out step's templates see its partition key; a `foreach` one also the whole item (`{{ item }}`)."""
    return {"partition", "item"} if p.foreach is not None else {"partition"}
