"""Lint of `step.patched("id")` in code workflows (docs/verify.md): the id names the marker a run records when it
takes the new path, so it must be the same string on every visit of every run: a literal (A44310, a warning: a
computed id may change between deploys and the marker is never found again) of the right form (A44311: not empty,
without '[', ']' or '#', which step and ctx ids use)."""

from __future__ import annotations

import ast

from ..diagnostics import Diagnostic, Severity, register
from .lint_ast import literal as _literal
from .lint_ast import span_of as _span

A44310 = register("A44310", "step.patched id is not a string literal", Severity.WARNING)
A44311 = register("A44311", "step.patched id has an invalid format")


def check_patches(path: str, fn: ast.AST) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "patched"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "step"):
            continue
        arg = node.args[0] if node.args else None
        pid = _literal(arg)
        if arg is None or pid is None:
            out.append(Diagnostic.at(A44310, "step.patched takes the patch id as a string literal", path,
                                     _span(arg or node), hint='e.g. step.patched("swap-b-c"): runs find their '
                                                              'marker by this id on every visit'))
        elif not pid.strip() or any(c in pid for c in "[]#"):
            out.append(Diagnostic.at(A44311, f"patch id {pid!r} must be non-empty and without '[', ']' or '#'",
                                     path, _span(arg)))
    return out
