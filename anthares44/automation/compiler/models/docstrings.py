"""Attribute docstrings of the models, read from their source only when the JSON Schema is generated.

pydantic can do this itself (`use_attribute_docstrings`), but it then parses every model's source at import,
which costs `a44 automation lint` about 40 ms of its cold start for text only the schema needs.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterable

from pydantic import BaseModel


def _own_docs(cls: type) -> dict[str, str]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    out: dict[str, str] = {}
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            out[node.target.id] = inspect.cleandoc(nxt.value.value)
    return out


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """YAML key (alias) -> docstring for every field of `model`, inherited ones included."""
    by_attr: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel:
            by_attr.update(_own_docs(cls))
    return {(f.alias or name): by_attr[name] for name, f in model.model_fields.items() if name in by_attr}


def all_models(roots: Iterable[type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """Every model class reachable from `roots` through field annotations, by class name."""
    import typing

    seen: dict[str, type[BaseModel]] = {}
    stack = list(roots)
    while stack:
        cls = stack.pop()
        if cls.__name__ in seen:
            continue
        seen[cls.__name__] = cls
        for f in cls.model_fields.values():
            todo = [f.annotation]
            while todo:
                t = todo.pop()
                if isinstance(t, type) and issubclass(t, BaseModel):
                    stack.append(t)
                todo.extend(typing.get_args(t))
    return seen
