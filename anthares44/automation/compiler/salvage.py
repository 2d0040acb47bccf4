"""Partial validation: the part of a declaration that is right, when its model refuses the whole.

pydantic reports every shape error of an object at once, but an object that fails its model has no instance,
and the semantic rules (duplicate step ids, `needs`, templates, CEL...) only run over instances. So a bad
enum value hid every other mistake of the file. Here the offending values are set aside (an unknown key
dropped, a wrong optional value removed, a wrong step id or workflow name replaced by a stand-in, a step that
is not a mapping replaced by an empty sleep) until the rest validates; the rules then check that instance.

The shape errors are reported once, from the first validation. The instance is only for the rules: its file
has errors, so it is never lowered, and stand-in names are kept out of the cross-file indexes.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .source import Path
from .validation import error_paths

# Each round removes at least one value, and the data is finite; the bound keeps a pathological file cheap.
MAX_ROUNDS = 8
STAND_IN_PREFIX = "a44-invalid-"


def salvage(model: type[BaseModel], data: Any, kind: str) -> tuple[BaseModel | None, frozenset[Path]]:
    """(instance of the salvaged data or None, paths replaced by a stand-in)."""
    stand_ins: set[Path] = set()
    for _ in range(MAX_ROUNDS):
        errors = error_paths(model, data)
        if errors is None:
            return model.model_validate(data), frozenset(stand_ins)
        repaired = data
        for path, etype in errors:
            repaired = _repair(repaired, path, etype, kind, stand_ins)
            if repaired is None:
                return None, frozenset()
        if repaired == data:
            return None, frozenset()
        data = repaired
    return None, frozenset()


def real_names(names: list[str]) -> list[str]:
    """`names` without the stand-ins (a hint never offers a name the file does not have)."""
    return [n for n in names if not n.startswith(STAND_IN_PREFIX)]


def _stand_in(path: Path, kind: str) -> Any:
    """A valid value for a required slot whose value is wrong (None: no stand-in, remove the container)."""
    if kind != "workflow":
        return None
    if path == ("name",):
        return STAND_IN_PREFIX + "name"
    if path == ("version",):
        return 1
    if len(path) == 3 and path[0] == "steps" and isinstance(path[1], int) and path[2] == "id":
        return f"{STAND_IN_PREFIX}step-{path[1] + 1}"
    if len(path) == 2 and path[0] == "steps" and isinstance(path[1], int):
        return {"id": f"{STAND_IN_PREFIX}step-{path[1] + 1}", "sleep": "1s"}
    return None


def _repair(data: Any, path: Path, etype: str, kind: str, stand_ins: set[Path]) -> Any:
    """`data` with the value at `path` set aside; None when nothing valid is left."""
    if etype == "missing":
        if (value := _stand_in(path, kind)) is not None:
            stand_ins.add(path)
            return _set(data, path, value)
        path = path[:-1]        # a required key is missing: the object that lacks it goes
    while path:
        if etype != "extra_forbidden" and (value := _stand_in(path, kind)) is not None:
            stand_ins.add(path)
            return _set(data, path, value)
        if isinstance(path[-1], str):
            return _set(data, path, _REMOVE)
        path = path[:-1]        # an item of a list (other than a step): the key that holds the list goes
    return None


_REMOVE = object()


def _set(data: Any, path: Path, value: Any) -> Any:
    """A copy of `data` (copying only the containers along `path`) with `value` at `path` (_REMOVE: deleted)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, dict) and isinstance(head, str):
        out = dict(data)
        if not rest and value is _REMOVE:
            out.pop(head, None)
        elif rest and head not in out:
            return data
        else:
            out[head] = _set(out.get(head), rest, value)
        return out
    if isinstance(data, list) and isinstance(head, int) and 0 <= head < len(data):
        items = list(data)
        items[head] = _set(items[head], rest, value)
        return items
    return data
