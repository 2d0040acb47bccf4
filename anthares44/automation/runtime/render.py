"""Run-time rendering of step parameters: every `{"$tpl": text}` leaf of the IR becomes a plain JSON value.

Templates render with the product's one sandboxed Jinja2 environment (compiler/templating.py: StrictUndefined,
no attribute escapes) over the run scope:
  input    the run's input
  steps    step id -> {"output": result, "status": state} of the steps that finished before this one
  trigger  the trigger event / firing
  run      {"id", "workflow_id", "idempotency_key", "attempt", "step_id"}
A template that is exactly one `{{ expr }}` returns the expression's native value (int, dict, list...) rather
than its text, so `params: ["{{ input.invoiceId }}"]` binds an integer as an integer. Anything else renders to a
string. Failures are `E_TEMPLATE` (permanent: the same data would fail the same way on every attempt); passing a
rendering limit (compiler/template_sandbox.py: output size, iterations, range, repetition, widths, nesting, the
deadline) is `E_TEMPLATE_LIMIT`, also permanent. One `render_params` call is one budget: all the templates of a
step's parameters share its iterations and its deadline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ..errors import E_TEMPLATE, E_TEMPLATE_LIMIT, A44Error

TPL_KEY = "$tpl"

# `{{ expr }}` and nothing else (whitespace-control dashes allowed); the inner text must not open or close
# another block, or `{{ a }} and {{ b }}` would be taken for one expression.
_SINGLE = re.compile(r"\A\{\{-?(?P<expr>.*?)-?\}\}\Z", re.S)


def make_scope(*, input: Any = None, steps: Mapping[str, Any] | None = None, trigger: Any = None,
               run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The scope `render_params` expects, with every root present (an absent root would read as undefined)."""
    return {"input": input if input is not None else {}, "steps": dict(steps or {}),
            "trigger": trigger if trigger is not None else {}, "run": dict(run or {})}


def _single_expression(text: str) -> str | None:
    m = _SINGLE.match(text)
    if m is None:
        return None
    expr = m.group("expr")
    if "{{" in expr or "}}" in expr or "{%" in expr or "{#" in expr:
        return None
    return expr.strip() or None


@lru_cache(maxsize=4096)
def _compiled(text: str):
    """(kind, compiled) for a template text: ('expr', callable) or ('template', Template). Cached because the same
    few templates render for every run of a workflow."""
    from ..compiler.templating import environment

    env = environment()
    expr = _single_expression(text)
    if expr is not None:
        return "expr", env.compile_expression(expr, undefined_to_none=False)
    return "template", env.from_string(text)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 120 else text[:117] + "...")


def _limit(text: str, limit: str, detail: str) -> A44Error:
    return A44Error(E_TEMPLATE_LIMIT, f"template {_shown(text)} passed the {limit} limit ({detail})",
                    hint="templates are bounded (docs/runtime.md, rendering limits): do heavy work in a connector")


def _fail(text: str, exc: BaseException) -> A44Error:
    from jinja2 import UndefinedError
    from jinja2.exceptions import SecurityError

    from ..compiler.template_sandbox import TemplateLimit

    if isinstance(exc, TemplateLimit):
        return _limit(text, exc.limit, f"{exc.value} > {exc.bound}")
    if isinstance(exc, MemoryError):
        return _limit(text, "memory", "the rendering ran out of memory")
    if isinstance(exc, RecursionError):
        return _limit(text, "nesting", "macros or values nest too deeply")
    if isinstance(exc, UndefinedError):
        what = f"undefined name: {exc.message}"
    elif isinstance(exc, SecurityError):
        what = f"refused by the sandbox: {exc}"
    else:
        what = f"{type(exc).__name__}: {exc}"
    return A44Error(E_TEMPLATE, f"template {_shown(text)} could not be rendered ({what})",
                    hint="check the names the template reads against the run's input and earlier steps' outputs")


def _native(value: Any, budget) -> Any:
    """A Jinja2 value as plain JSON, counted against the output limit. Undefined (StrictUndefined) raises here,
    which is the point: a missing name must not silently become null."""
    from jinja2 import Undefined

    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, str):
            budget.spend_output(len(value))
        return value if type(value) in (bool, int, float, str, type(None)) else str(value)  # Markup -> str
    if isinstance(value, Undefined):
        str(value)  # StrictUndefined raises UndefinedError with the missing name
        raise ValueError("undefined value")  # pragma: no cover - a lenient Undefined subclass
    budget.tick()
    if isinstance(value, Mapping):
        return {str(k): _native(v, budget) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)) or hasattr(value, "__next__"):
        return [_native(v, budget) for v in value]
    return _native(str(value), budget)


def _render(text: str, scope: Mapping[str, Any], budget) -> Any:
    kind, compiled = _compiled(text)
    if kind == "expr":
        return _native(compiled(**scope), budget)
    parts = []
    for chunk in compiled.generate(**scope):
        budget.spend_output(len(chunk))
        parts.append(chunk)
    return "".join(parts)


def render_value(text: str, scope: Mapping[str, Any], budget=None) -> Any:
    """Render one template text: the native value of a single `{{ expr }}`, otherwise the rendered string."""
    from ..compiler.template_sandbox import Budget, spending

    budget = budget if budget is not None else Budget()
    try:
        with spending(budget):
            return _render(text, scope, budget)
    except A44Error:
        raise
    except Exception as exc:  # noqa: BLE001 - jinja2 and user filters raise anything; the run must get E_TEMPLATE
        raise _fail(text, exc) from None


def render_params(params: Any, scope: Mapping[str, Any], *, deadline: float | None = None) -> Any:
    """Render every `{"$tpl": text}` leaf of IR parameters over `scope`; other values are copied as plain JSON.
    `deadline` (time.monotonic()) bounds the whole rendering."""
    from ..compiler.template_sandbox import Budget

    return _render_tree(params, scope, Budget(deadline=deadline))


def _render_tree(params: Any, scope: Mapping[str, Any], budget) -> Any:
    if isinstance(params, dict):
        if len(params) == 1 and TPL_KEY in params and isinstance(params[TPL_KEY], str):
            return render_value(params[TPL_KEY], scope, budget)
        return {k: _render_tree(v, scope, budget) for k, v in params.items()}
    if isinstance(params, (list, tuple)):
        return [_render_tree(v, scope, budget) for v in params]
    return params
