"""A code step's row counts and expectations (§16, docs/rows.md): what `step.rows(...)` or the body's return
(`{"rows": {"in": 10, ...}, ...}`) reported, and `step.run(..., expect=...)` checked over them when the body
returns. The counts are written with the attempt's outcome, so a replay that skips the body still has them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..compiler.row_counts import ROW_KEYS, counts, expectation_failed
from ..errors import E_EXPR_EVAL, A44Error

EXPECT_ROOTS = {"rows", "result", "input"}
EXPR_TIMEOUT_S = 1.0


class StepRows:
    def __init__(self) -> None:
        self._pending: dict[str, dict[str, int]] = {}

    def begin(self, step_id: str) -> None:
        self._pending.pop(step_id, None)

    def report(self, step_id: str, value: dict) -> None:
        self._pending[step_id] = counts(value, f"step.rows() of step {step_id}")

    def reported(self, step_id: str, result: Any) -> dict[str, int] | None:
        """`step.rows(...)` if the body called it, else a `rows` mapping of in / out / error in its result."""
        if step_id in self._pending:
            return self._pending[step_id]
        got = result.get("rows") if isinstance(result, dict) else None
        if isinstance(got, dict) and got and set(got) <= set(ROW_KEYS):
            return counts(got, f"rows returned by step {step_id}")
        return None

    @staticmethod
    def programs(expect: Any) -> list:
        from ..compiler.rules.expectations import ROW_FIELDS, expect_list
        from ..grammar import compile_expression

        out = []
        for text in expect_list(expect):
            res = compile_expression(text, roots=EXPECT_ROOTS, expect_bool=True, fields=ROW_FIELDS)
            if res.program is None:
                raise ValueError(f"expect {text!r}: " + "; ".join(i.message for i in res.issues))
            out.append(res.program)
        return out

    @staticmethod
    async def check(step_id: str, programs: list, rows: dict | None, result: Any, input: Any) -> A44Error | None:
        """The first expectation that does not hold (E_EXPECTATION_FAILED) or does not evaluate (E_EXPR_EVAL)."""
        activation = {"rows": rows or {}, "result": result, "input": input}
        for prog in programs:
            deadline = time.monotonic() + EXPR_TIMEOUT_S
            try:
                ok = await asyncio.to_thread(prog.evaluate, activation, deadline=deadline)
            except Exception as exc:  # EvalError: the expression (or absent counts) is at fault
                return A44Error(E_EXPR_EVAL, f"expect of step {step_id} ({prog.text}) failed: {exc}",
                                step_id=step_id)
            if ok is not True:
                return expectation_failed(f"step {step_id}", prog.text, activation, step_id)
        return None
