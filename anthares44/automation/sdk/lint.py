"""Lint of code workflows (§12): what `publish` checks of a `.py` module, as diagnostics with file, line and
column instead of one refusal. The module is imported as `publish` imports it (loader.import_path: its code
runs, its directory on sys.path), after a static pass over its source: every `@workflow` has a valid name, and
every literal step id (`step.run`, `step.sleep`, `step.map`) and duration is of the right form, once per
workflow, and every `step.patched` id a literal of the right form (lint_patches.py).
"""

from __future__ import annotations

import ast
import os
import re
import sys
import traceback
from collections.abc import Callable

from ..calendar import parse_span
from ..compiler.models.types import STEP_ID_PATTERN, WORKFLOW_NAME_PATTERN
from ..diagnostics import Diagnostic, Severity, Span, register, sorted_diagnostics
from ..durations import parse_duration
from ..errors import A44Error
from .lint_ast import literal as _literal
from .lint_ast import span_of as _span
from .lint_patches import check_patches

A44800 = register("A44800", "code workflow module cannot be imported")
A44801 = register("A44801", "module declares no @workflow")
A44802 = register("A44802", "code workflow name has an invalid format")
A44803 = register("A44803", "code step id has an invalid format")
A44804 = register("A44804", "code step id used at two places of one workflow", Severity.WARNING)
A44805 = register("A44805", "invalid duration in a code workflow")

NAME_RE = re.compile(WORKFLOW_NAME_PATTERN)      # as a YAML workflow's `name`
STEP_ID_RE = re.compile(STEP_ID_PATTERN)         # as a YAML step's `id`
STEP_CALLS = ("run", "sleep", "sleep_until", "map")


def lint_code(paths: list[str]) -> list[Diagnostic]:
    """Diagnostics of the code workflow modules `paths` (each a `.py` file); never raises for a user's mistake."""
    out: list[Diagnostic] = []
    for path in paths:
        out.extend(_lint_module(os.path.normpath(path)))
    return sorted_diagnostics(out)


def _lint_module(path: str) -> list[Diagnostic]:
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except SyntaxError as exc:
        line, col = exc.lineno or 1, exc.offset or 1
        return [Diagnostic.at(A44800, f"Python syntax error: {exc.msg}", path, Span(line, col, line, col + 1))]
    except OSError as exc:
        return [Diagnostic.at(A44800, f"cannot read the module: {exc.strerror or exc}", path, None)]
    diags = [d for fn in _workflow_functions(tree) for d in _check_workflow(path, fn)]
    from .loader import import_path, workflows_of

    quiet = sys.dont_write_bytecode
    sys.dont_write_bytecode = True      # linting leaves no __pycache__ in the user's tree
    try:
        found = workflows_of(import_path(path))
    except A44Error as exc:
        cause = exc.__cause__ or exc
        line = _line_in(path, cause)
        message = f"importing the module failed: {type(cause).__name__}: {cause}" if cause is not exc \
            else exc.message
        return diags + [Diagnostic.at(A44800, message, path, Span(line, 1, line, 1),
                                      hint="publish imports the module the same way; fix the error and lint "
                                           "again")]
    finally:
        sys.dont_write_bytecode = quiet
    if not found:
        diags.append(Diagnostic.at(A44801, "this module declares no @workflow; publish refuses it", path, None,
                                   hint="from anthares44.automation import workflow, step; decorate an "
                                        "`async def f(ctx, input)` with @workflow(\"name\", version=1)"))
    return diags


def _line_in(path: str, exc: BaseException) -> int:
    """The last line of `path` the exception passed through (1 when none)."""
    if isinstance(exc, SyntaxError) and exc.lineno and os.path.abspath(exc.filename or "") == os.path.abspath(path):
        return exc.lineno
    lines = [fr.lineno for fr in traceback.extract_tb(exc.__traceback__)
             if os.path.abspath(fr.filename) == os.path.abspath(path) and fr.lineno]
    return lines[-1] if lines else 1


def _is_workflow_decorator(dec: ast.expr) -> bool:
    f = dec.func if isinstance(dec, ast.Call) else dec
    return (isinstance(f, ast.Name) and f.id == "workflow") or (isinstance(f, ast.Attribute) and f.attr == "workflow")


def _workflow_functions(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, (ast.AsyncFunctionDef, ast.FunctionDef)):
            decs = [d for d in node.decorator_list if _is_workflow_decorator(d)]
            if decs:
                yield node, decs[0]


def _check_workflow(path: str, found) -> list[Diagnostic]:
    fn, dec = found
    out: list[Diagnostic] = []
    name_node = dec.args[0] if isinstance(dec, ast.Call) and dec.args else None
    name = _literal(name_node)
    if name is not None and name_node is not None and not NAME_RE.match(name):
        out.append(Diagnostic.at(A44802, f"workflow name {name!r} does not match {NAME_RE.pattern}", path,
                                 _span(name_node), hint="lowercase letters, digits and '-', starting with a "
                                                        "letter, e.g. invoice-settle"))
    out.extend(check_patches(path, fn))
    seen: dict[str, int] = {}
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STEP_CALLS
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "step" and node.args):
            continue
        sid = _literal(node.args[0])
        if sid is not None:
            if not STEP_ID_RE.match(sid):
                out.append(Diagnostic.at(A44803, f"step id {sid!r} does not match {STEP_ID_RE.pattern}", path,
                                         _span(node.args[0]), hint="a letter followed by letters, digits, '_' "
                                                                   "or '-'"))
            elif sid in seen:
                out.append(Diagnostic.at(A44804, f"step id {sid!r} is already used on line {seen[sid]} of "
                                                 f"workflow {fn.name!r}", path, _span(node.args[0]),
                                         hint="a run records each step by its id: two calls with one id replay "
                                              "as one; give each its own id"))
            else:
                seen[sid] = node.lineno
        durations: list[tuple[ast.expr, Callable[[str], object]]] = [
            (kw.value, parse_duration) for kw in node.keywords if kw.arg == "timeout"]
        if node.func.attr == "sleep" and len(node.args) > 1:
            durations.append((node.args[1], parse_span))     # a sleep may count calendar units (§19)
        for d, parse in durations:
            text = _literal(d)
            if text is None:
                continue
            try:
                parse(text)
            except ValueError as exc:       # CalendarError is a ValueError
                out.append(Diagnostic.at(A44805, str(exc), path, _span(d)))
    return out
