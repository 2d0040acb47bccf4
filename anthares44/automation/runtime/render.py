"""Run-time rendering of step parameters: every `{"$tpl": text}` leaf of the IR becomes a plain JSON value.

Templates render with the product's one sandboxed Jinja2 environment (compiler/templating.py: StrictUndefined,
no attribute escapes) over the run scope:
  input    the run's input
  steps    step id -> {"output": result, "status": state} of the steps that finished before this one
  trigger  the trigger event / firing
  run      {"id", "workflow_id", "idempotency_key", "attempt", "step_id"}
A template that is exactly one `{{ expr }}` returns the expression's native value (int, dict, list...) rather
than its text, so `params: ["{{ input.invoiceId }}"]` binds an integer as an integer. Anything else renders to a
string. Failures are `E_TEMPLATE` (permanent: the same data would fail the same way on every attempt).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Mapping

from ..errors import E_TEMPLATE, A44Error

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


def _fail(text: str, exc: BaseException) -> A44Error:
    from jinja2 import UndefinedError
    from jinja2.exceptions import SecurityError

    if isinstance(exc, UndefinedError):
        what = f"undefined name: {exc.message}"
    elif isinstance(exc, SecurityError):
        what = f"refused by the sandbox: {exc}"
    else:
        what = f"{type(exc).__name__}: {exc}"
    return A44Error(E_TEMPLATE, f"template {text!r} could not be rendered ({what})",
                    hint="check the names the template reads against the run's input and earlier steps' outputs")


def _native(value: Any) -> Any:
    """A Jinja2 value as plain JSON. Undefined (StrictUndefined) raises here, which is the point: a missing name
    must not silently become null."""
    from jinja2 import Undefined

    if value is None or isinstance(value, (bool, int, float, str)):
        return value if type(value) in (bool, int, float, str, type(None)) else str(value)  # Markup -> str
    if isinstance(value, Undefined):
        str(value)  # StrictUndefined raises UndefinedError with the missing name
        raise ValueError("undefined value")  # pragma: no cover - a lenient Undefined subclass
    if isinstance(value, Mapping):
        return {str(k): _native(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)) or hasattr(value, "__next__"):
        return [_native(v) for v in value]
    return str(value)


def render_value(text: str, scope: Mapping[str, Any]) -> Any:
    """Render one template text: the native value of a single `{{ expr }}`, otherwise the rendered string."""
    try:
        kind, compiled = _compiled(text)
        if kind == "expr":
            return _native(compiled(**scope))
        return compiled.render(**scope)
    except A44Error:
        raise
    except Exception as exc:  # noqa: BLE001 - jinja2 and user filters raise anything; the run must get E_TEMPLATE
        raise _fail(text, exc) from None


def render_params(params: Any, scope: Mapping[str, Any]) -> Any:
    """Render every `{"$tpl": text}` leaf of IR parameters over `scope`; other values are copied as plain JSON."""
    if isinstance(params, dict):
        if len(params) == 1 and TPL_KEY in params and isinstance(params[TPL_KEY], str):
            return render_value(params[TPL_KEY], scope)
        return {k: render_params(v, scope) for k, v in params.items()}
    if isinstance(params, (list, tuple)):
        return [render_params(v, scope) for v in params]
    return params
