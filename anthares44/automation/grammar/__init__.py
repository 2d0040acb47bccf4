"""CEL (Common Expression Language) for `if:` conditions, trigger `filter:`s and DLQ selectors.

Public API: `compile_expression(text, roots=, step_ids=, expect_bool=)` -> result with `.program` and
`.issues`; `Program.evaluate(activation)`, `Program.to_ir()`, `load_program(ir)`; `ExprIssue`, `EvalError`.
Importing this package is cheap: `compile_expression` (and lark, ~4 MB resident) is imported on first use, so a
daemon that only evaluates compiled programs (`load_program`) never loads the parser (issue 32: idle RSS); the
lark parser is built on first use. Lark never leaks out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import codes  # noqa: F401  (registers the A443xx diagnostic codes)
from .program import EvalError, Program, load_program
from .values import EVAL_CODES

if TYPE_CHECKING:
    from .api import CompileResult, ExprIssue, compile_expression

_FROM_API = ("compile_expression", "ExprIssue", "CompileResult")


def __getattr__(name: str) -> Any:
    if name in _FROM_API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["compile_expression", "load_program", "ExprIssue", "Program", "EvalError", "CompileResult",
           "EVAL_CODES"]
