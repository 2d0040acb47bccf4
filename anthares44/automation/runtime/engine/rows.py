"""A YAML step's row counts and expectations, at the moment its call succeeded (§16, docs/rows.md).

`measure` evaluates the step's `rows:` (or its connector's default) over its result, then its `expect:` over
those counts, the result, the input and earlier steps; a false expectation turns the success into a final
E_EXPECTATION_FAILED failure that still carries the counts (they explain it). `workflow_failure` checks the
workflow's `expect:` over the run's totals when every step is done. Expressions run off the event loop under a
deadline (runtime/evaluation.py); how the counts add up is compiler/row_counts.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...compiler.ir import Expr, NodeIR, WorkflowIR
from ...compiler.row_counts import counts, expectation_failed
from ...compiler.rules.expectations import DEFAULT_ROWS, ROWS_ROOTS
from ...errors import E_EXPR_EVAL, A44Error
from .. import evaluation
from .invoke import Outcome

EXPR_TIMEOUT_S = 1.0
_programs: dict[int, tuple[Expr, Any]] = {}
_defaults: dict[str, dict[str, Expr]] = {}


def _program(expr: Expr):
    hit = _programs.get(id(expr))
    if hit is None or hit[0] is not expr:
        from ...grammar import load_program

        if len(_programs) > 4096:
            _programs.clear()
        hit = _programs[id(expr)] = (expr, load_program(expr.program))
    return hit[1]


def _default_rows(uses: str | None) -> dict[str, Expr] | None:
    texts = DEFAULT_ROWS.get(uses or "")
    if not texts:
        return None
    if uses not in _defaults:
        from ...grammar import compile_expression

        _defaults[uses] = {k: Expr(cel=t, program=compile_expression(t, roots=ROWS_ROOTS).program.to_ir())
                           for k, t in texts.items()}
    return _defaults[uses]


def recorded(rows) -> dict[str, dict[str, dict]]:
    """`step_rows_of_run` rows as step -> partition -> counts."""
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        c = {k: r[col] for k, col in (("in", "rows_in"), ("out", "rows_out"), ("error", "rows_error"))
             if r[col] is not None}
        out.setdefault(r["step_id"], {})[r["partition"]] = c
    return out


async def _eval(expr: Expr, activation: dict, what: str, step_id: str | None) -> Any:
    try:
        return await evaluation.evaluate(_program(expr), activation, EXPR_TIMEOUT_S)
    except A44Error as err:
        err.step_id = err.step_id or step_id
        raise
    except Exception as exc:  # EvalError: the expression, not the worker, is at fault
        raise A44Error(E_EXPR_EVAL, f"{what} ({expr.cel}) failed: {exc}", step_id=step_id) from None


async def measure(node: NodeIR, out: Outcome, make_scope: Callable[[], dict]) -> Outcome:
    """The outcome of a succeeded call with its counts in `out.rows`, or a final failure (E_EXPR_EVAL when a
    count does not evaluate to a non-negative integer, E_EXPECTATION_FAILED when an expectation is false)."""
    if out.status != "succeeded":
        return out
    exprs = node.rows if node.rows is not None else (_default_rows(node.connector.uses) if node.connector else None)
    if not exprs and not node.expect:
        return out
    sid = node.id
    scope = make_scope()        # only now: most steps count nothing and expect nothing
    try:
        got = {}
        for key, expr in (exprs or {}).items():
            got[key] = await _eval(expr, {"result": out.result, "input": scope.get("input")},
                                   f"rows.{key} of step {sid}", sid)
        try:
            rows = counts(got, f"rows of step {sid}")
        except ValueError as exc:
            raise A44Error(E_EXPR_EVAL, str(exc), step_id=sid) from None
        out.rows = rows if exprs else None
        activation = {"rows": rows, "result": out.result, "input": scope.get("input"),
                      "steps": scope.get("steps", {})}
        for expr in node.expect:
            if await _eval(expr, activation, f"expect of step {sid}", sid) is not True:
                return Outcome("failed", error=expectation_failed(f"step {sid}", expr.cel, activation, sid),
                               rows=out.rows, seq=out.seq)
    except A44Error as err:
        return Outcome("failed", error=err, rows=out.rows, seq=out.seq)
    return out


async def workflow_failure(ir: WorkflowIR, totals: dict, result: Any, scope: dict) -> A44Error | None:
    """The first of the workflow's expectations that is false (or fails to evaluate), else None."""
    rows = {k: v for k, v in (("in", totals.get("rows_in")), ("out", totals.get("rows_out")),
                              ("error", totals.get("rows_in_error"))) if v is not None}
    activation = {"rows": rows, "result": result, "input": scope.get("input"), "steps": scope.get("steps", {})}
    for expr in ir.expect:
        try:
            ok = await _eval(expr, activation, f"expect of workflow {ir.name}", None)
        except A44Error as err:
            return err
        if ok is not True:
            return expectation_failed(f"workflow {ir.name}", expr.cel, activation)
    return None
