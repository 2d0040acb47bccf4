"""Row counts and expectations (§16, docs/rows.md): every `rows:` expression and every `expect:` condition of a
step or a workflow compiles against its roots, and an expectation reads only row counts that something reports.

A step's `rows` see `result` (its own result) and `input`; its `expect` sees `rows` (its counts), `result`,
`input` and the steps that finished before it. A workflow's `expect` sees the run's `rows` totals, `result` (the
sink steps' outputs), `input` and every step.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING

from ...diagnostics import Diagnostic, register
from ..graph import predecessors
from .expressions import expression_diagnostics

if TYPE_CHECKING:
    from ..models import Step
    from ..project import Project
    from ..source import Path, SourceFile

A44710 = register("A44710", "expectation reads a row count nothing reports")

ROW_KEYS = ("in", "out", "error")
ROW_FIELDS = {"rows": {k: "int" for k in ROW_KEYS}}
ROWS_ROOTS = {"result", "input"}
STEP_EXPECT_ROOTS = {"rows", "result", "input", "steps"}
WORKFLOW_EXPECT_ROOTS = {"rows", "result", "input", "steps"}
DEFAULT_ROWS = {"sql/execute": {"out": "result.rowCount"}}   # the command status count (`UPDATE 3` -> 3)


def step_rows(step: Step, *, defaults: bool = True) -> dict[str, str]:
    """The row counts a step reports, key -> CEL text: its `rows:`, else its connector's default (applied by the
    runtime, not written into the IR: an unchanged definition keeps its sha256)."""
    if step.rows is not None:
        declared = {"in": step.rows.in_, "out": step.rows.out, "error": step.rows.error}
        return {k: v for k, v in declared.items() if v is not None}
    return dict(DEFAULT_ROWS.get(step.uses or "", {})) if defaults else {}


def expect_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def row_reads(text: str) -> list[tuple[str, int]]:
    """(field, offset of the field) of every `rows.X` in an expression that parses; [] for one that does not."""
    from ...grammar.parser import SyntaxProblem, parse

    try:
        stack = [parse(text)]
    except SyntaxProblem:
        return []
    out = []
    while stack:
        n = stack.pop()
        if n.kind == "select" and n.args[0].kind == "ident" and n.args[0].args[0] == "rows":
            out.append((n.args[1], n.offset + 1))
        stack.extend(n.children())
    return sorted(out, key=lambda x: x[1])


def _expectations(src: SourceFile, path: Path, value: str | list[str] | None, roots: set[str],
                  before: Collection[str], reported: set[str], whose: str) -> Iterator[Diagnostic]:
    texts = expect_list(value)
    for j, text in enumerate(texts):
        at = path + (("expect", j) if isinstance(value, list) else ("expect",))
        found = list(expression_diagnostics(src, at, text, roots, before, fields=ROW_FIELDS))
        yield from found
        if found:
            continue
        for field, offset in row_reads(text):
            if field in reported:
                continue
            if field not in ROW_KEYS:
                msg, hint = f"rows has no field {field!r}", "row counts are rows.in, rows.out and rows.error"
            else:
                msg = f"the expectation reads rows.{field} but {whose} reports no {field!r} row count"
                hint = f"add `rows: {{{field}: <CEL over result>}}` to the step that counts them (docs/rows.md)"
            yield Diagnostic.at(A44710, msg, src.path, src.scalar_span(at, offset, len(field)), hint=hint)


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        wf, src = decl.model, decl.src
        before = predecessors(wf)
        everything: set[str] = set()
        for i, step in enumerate(wf.steps):
            path = decl.path + ("steps", i)
            reported = step_rows(step)
            everything |= reported.keys()
            if step.rows is not None:
                for key, text in reported.items():
                    yield from expression_diagnostics(src, path + ("rows", key), text, ROWS_ROOTS,
                                                      expect_bool=False)
            yield from _expectations(src, path, step.expect, STEP_EXPECT_ROOTS, before[step.id], set(reported),
                                     f"step {step.id!r}")
        yield from _expectations(src, decl.path, wf.expect, WORKFLOW_EXPECT_ROOTS, {s.id for s in wf.steps},
                                 everything, "no step")
