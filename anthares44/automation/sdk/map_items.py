"""The keys of a code workflow's `step.map` (docs/partitions.md, "Fan-out over items"), the twin of a YAML
`foreach` with `key:`: `step.map("bill", invoices, bill_one, key="id")` (or `key=lambda inv: inv["id"]`) keys each
item by its field (or the function's answer) and calls `fn` with the whole item; without `key` the items are keys
themselves (a string is itself, anything else its JSON) and `fn` gets the key, as before. At most MAX_ITEMS items;
a missing, null, non-string or repeated key is refused before any item runs, naming the item's index. The items
are the workflow's own values: nothing of them is stored but their keys, in the items' attempt ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..compiler.ir import MAX_ITEMS


def map_keys(name: str, items: list, key: str | Callable[[Any], Any] | None) -> list[str]:
    if len(items) > MAX_ITEMS:
        raise ValueError(f"step.map {name!r}: {len(items)} items (at most {MAX_ITEMS:,})")
    if key is None:
        keys = [k if isinstance(k, str) else json.dumps(k, sort_keys=True) for k in items]
    else:
        keys = []
        for i, item in enumerate(items):
            if callable(key):
                k = key(item)
            elif isinstance(item, dict):
                k = item.get(key)
            else:
                raise ValueError(f"step.map {name!r}: item {i} is {type(item).__name__}, not an object with "
                                 f"field {key!r}")
            if k is None:
                raise ValueError(f"step.map {name!r}: item {i} has a null key")
            if not isinstance(k, str):
                raise ValueError(f"step.map {name!r}: the key of item {i} is {type(k).__name__}, not a string")
            keys.append(k)
    seen: dict[str, int] = {}
    for i, k in enumerate(keys):
        first = seen.setdefault(k, i)
        if first != i:
            raise ValueError(f"step.map {name!r}: items {first} and {i} have the same key {k[:80]!r} (partition "
                             f"keys must be unique)")
    return keys
