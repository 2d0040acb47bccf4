"""Stable diagnostic codes of the expression language (A44300-A44399), registered with `diagnostics`.

Evaluation error codes (`E_EXPR_*`) live in `values.py`; the runtime maps them all to E_EXPR_EVAL.
"""

from __future__ import annotations

from ..diagnostics import register

SYNTAX = register("A44300", "CEL syntax error")
UNKNOWN_ROOT = register("A44301", "unknown identifier in expression")
UNKNOWN_STEP = register("A44302", "expression references an unknown or later step")
TYPE_ERROR = register("A44303", "type error in expression")
NOT_BOOL = register("A44304", "expression must be a boolean")
TOO_COMPLEX = register("A44305", "expression too complex (size or nesting limit)")
UNSUPPORTED = register("A44306", "expression uses a feature this CEL does not support")
