"""The two readings of Python source that the code-workflow lints share (lint.py, lint_patches.py): where a node
is, as a diagnostic span, and the string a node spells when it is a string literal."""

from __future__ import annotations

import ast

from ..diagnostics import Span


def span_of(node: ast.AST) -> Span:
    # expressions and statements carry positions; the bare ast.AST type does not say so
    line, offset = getattr(node, "lineno", 1), getattr(node, "col_offset", 0)
    end_line = getattr(node, "end_lineno", None) or line
    end_col = (getattr(node, "end_col_offset", None) or offset) + 1
    col = offset + 1
    return Span(line, col, end_line, end_col)


def literal(node: ast.AST | None) -> str | None:
    """The string of a string literal; None for anything else (a computed value, a number, no node)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
