"""The one Jinja2 environment of the product: sandboxed and bounded, StrictUndefined, no autoescape (values are
data, not HTML). The compiler checks templates with it and the runtime renders them with it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

from ..suggestions import listing
from .validation import did_you_mean

if TYPE_CHECKING:
    from .template_sandbox import BoundedEnvironment

# a template problem: (kind, message, offset, length, hint)
Issue = tuple[str, str, int, int, str | None]

_MARK = re.compile(r"\{\{|\{%")


def is_template(text: str) -> bool:
    return bool(_MARK.search(text))


@lru_cache(maxsize=1)
def environment() -> BoundedEnvironment:
    """The bounded sandbox (template_sandbox.py): every rendering is capped in size, iterations and time."""
    from jinja2 import StrictUndefined

    from .template_sandbox import BoundedEnvironment

    return BoundedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


def _offset_of_line(text: str, lineno: int) -> int:
    off = 0
    for _ in range(max(lineno - 1, 0)):
        nxt = text.find("\n", off)
        if nxt < 0:
            break
        off = nxt + 1
    return off


def _name_offset(text: str, name: str) -> int:
    for m in re.finditer(r"\{\{|\{%", text):
        hit = re.compile(r"\b" + re.escape(name) + r"\b").search(text, m.end())
        if hit:
            return hit.start()
    return 0


def template_issues(text: str, roots: set[str], step_ids: Collection[str] | None) -> Iterator[Issue]:
    """Yields (kind, message, offset, length, hint); kind is 'syntax', 'root' or 'step'."""
    from jinja2 import TemplateSyntaxError, nodes

    env = environment()
    try:
        ast = env.parse(text)
    except TemplateSyntaxError as exc:
        off = _offset_of_line(text, exc.lineno or 1)
        yield "syntax", f"template syntax error: {exc.message}", off, 1, None
        return
    except Exception as exc:  # noqa: BLE001 - jinja2 can raise other errors on odd input; never leak them
        yield "syntax", f"template syntax error: {exc}", 0, 1, None
        return
    from jinja2 import meta

    try:
        # code generation is where jinja2 notices unknown filters and tests
        undeclared = meta.find_undeclared_variables(ast)
    except TemplateSyntaxError as exc:
        yield "syntax", f"template error: {exc.message}", _offset_of_line(text, exc.lineno or 1), 1, None
        return
    except Exception as exc:  # noqa: BLE001 - never leak jinja2 internals
        yield "syntax", f"template error: {exc}", 0, 1, None
        return
    for name in sorted(undeclared):
        if name not in roots:
            yield ("root", f"template uses {name!r}; known names here: {', '.join(sorted(roots))}",
                   _name_offset(text, name), len(name), did_you_mean(name, roots))
    if step_ids is None or "steps" not in roots:
        return
    for node in ast.find_all((nodes.Getattr, nodes.Getitem)):
        assert isinstance(node, (nodes.Getattr, nodes.Getitem))   # what find_all was asked for
        target = node.node
        if not (isinstance(target, nodes.Name) and target.name == "steps"):
            continue
        if isinstance(node, nodes.Getattr):
            sid = node.attr
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            sid = node.arg.value
        else:
            continue
        if sid not in step_ids:
            known = listing(step_ids) or "none"
            yield ("step", f"template reads steps.{sid}, which is not a step that finished before this one "
                           f"(available: {known})", max(text.find(sid), 0), len(sid),
                   did_you_mean(sid, step_ids))
