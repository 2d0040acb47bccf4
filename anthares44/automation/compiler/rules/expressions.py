"""Expression rules (§5): every `if:`, partition source (`partitions.foreach`, `partitions.range.from/to`, which
also see `partitions.last_success`) and event `filter:` parses and type-checks against its known roots.

`if:` sees `input`, `trigger` and `steps` of the steps that certainly finished before it (its transitive
`needs`, or all earlier steps in a sequential workflow); an event `filter:` sees `data` and the envelope fields.
Issues from the CEL checker carry an offset into the expression, mapped back into the YAML scalar.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Any

from ...diagnostics import Diagnostic, Severity
from ..graph import predecessors

if TYPE_CHECKING:
    from ..models import InlineTrigger, Workflow
    from ..models.workflow import Partitions
    from ..project import Project
    from ..source import Path, SourceFile

IF_ROOTS = {"input", "steps", "trigger", "run"}
# a range's `from` / `to` also see `partitions.last_success`: the last partition this step processed (any run)
RANGE_ROOTS = IF_ROOTS | {"partitions"}
ITEM_KEY_ROOTS = IF_ROOTS | {"item"}      # `partitions.key` sees each item of `foreach`
FILTER_ROOTS = {"data", "id", "type", "idempotency_key", "partition_key", "occurred_at", "attempt", "trigger_id"}


def expression_diagnostics(src: SourceFile, path: Path, text: str, roots: set[str],
                           step_ids: Collection[str] | None = None, *, expect_bool: bool = True,
                           fields: dict[str, Any] | None = None) -> Iterator[Diagnostic]:
    from ...grammar import compile_expression

    res = compile_expression(text, roots=roots, step_ids=step_ids, expect_bool=expect_bool, fields=fields)
    for issue in res.issues:
        sev = Severity.WARNING if issue.severity == "warning" else Severity.ERROR
        yield Diagnostic.at(issue.code, issue.message, src.path,
                            src.scalar_span(path, issue.offset, max(issue.length, 1)), severity=sev,
                            hint=issue.hint)


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        wf = decl.model
        before = predecessors(wf)
        for i, step in enumerate(wf.steps):
            if step.if_ is not None:
                yield from expression_diagnostics(decl.src, decl.path + ("steps", i, "if"), step.if_, IF_ROOTS,
                                                  before[step.id])
            for key, text in _partition_sources(step.partitions):
                    yield from expression_diagnostics(decl.src, decl.path + ("steps", i, "partitions") + key, text,
                                                      _roots_of(key),
                                                      before[step.id], expect_bool=False)
        for j, trig in enumerate(_inline(wf)):
            if trig.filter is not None:
                key = ("trigger",) if wf.trigger is not None and j == 0 else ("triggers", j - (wf.trigger is not None))
                yield from expression_diagnostics(decl.src, decl.path + key + ("filter",), trig.filter, FILTER_ROOTS)
    for decl in project.of_kind("trigger"):
        flt = getattr(decl.model, "filter", None)
        if flt is not None:
            yield from expression_diagnostics(decl.src, decl.path + ("filter",), flt, FILTER_ROOTS)


def _roots_of(key: Path) -> set[str]:
    return RANGE_ROOTS if key[0] == "range" else ITEM_KEY_ROOTS if key[0] == "key" else IF_ROOTS


def _partition_sources(p: Partitions | None) -> list[tuple[Path, str]]:
    if p is None:
        return []
    out: list[tuple[Path, str]] = [(("foreach",), p.foreach)] if p.foreach else []
    out += [(("key",), p.key)] if p.key is not None else []
    if p.range is not None:
        out += [(("range", "from"), p.range.from_)] if p.range.from_ is not None else []
        out += [(("range", "to"), p.range.to)]
    return out


def _inline(wf: Workflow) -> list[InlineTrigger]:
    out: list[InlineTrigger] = []
    if wf.trigger is not None:
        out.append(wf.trigger)
    out.extend(wf.triggers or ())
    return out
