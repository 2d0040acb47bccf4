"""CEL (Common Expression Language) for `if:` conditions, trigger `filter:`s and DLQ selectors.

Public API: `compile_expression(text, roots=, step_ids=, expect_bool=)` -> result with `.program` and
`.issues`; `Program.evaluate(activation)`, `Program.to_ir()`, `load_program(ir)`; `ExprIssue`, `EvalError`.
Importing this package is cheap: the lark parser is built on first use. Lark never leaks out.
"""

from __future__ import annotations

from . import codes  # noqa: F401  (registers the A443xx diagnostic codes)
from .api import CompileResult, ExprIssue, compile_expression
from .program import EvalError, Program, load_program
from .values import EVAL_CODES

__all__ = ["compile_expression", "load_program", "ExprIssue", "Program", "EvalError", "CompileResult",
           "EVAL_CODES"]
