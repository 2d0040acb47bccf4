"""Did-you-mean suggestions and name listings for diagnostics, at a cost that stays linear in the file.

Finding the closest of n names costs O(n), so a workflow with thousands of steps and thousands of misspelt
step references would compile in quadratic time. Like TypeScript's spelling suggestions, a compile (inside
`bounded()`) therefore searches pools of more than SMALL_POOL names for its first LARGE_SEARCHES misspellings
only; later ones get no suggestion. Small pools (a model's keys, an expression's roots) are always searched.
Listings of names in a message show the first few, in sorted order.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

SMALL_POOL = 100
LARGE_SEARCHES = 10
LISTED = 12

_left: ContextVar[list[int] | None] = ContextVar("a44_large_searches_left", default=None)


@contextmanager
def bounded() -> Iterator[None]:
    """Within this block, at most LARGE_SEARCHES searches through large pools are made."""
    token = _left.set([LARGE_SEARCHES])
    try:
        yield
    finally:
        _left.reset(token)


def closest(word: str, candidates: Collection[str], cutoff: float) -> str | None:
    """The candidate most like `word` (difflib ratio >= cutoff), or None."""
    if len(candidates) > SMALL_POOL:
        left = _left.get()
        if left is not None:
            if left[0] <= 0:
                return None
            left[0] -= 1
    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=cutoff)
    return close[0] if close else None


def first_names(names: Collection[str], k: int) -> list[str]:
    """The first `k` of `names` in sorted order (a `compiler.graph.Before` finds them without a full sort)."""
    first = getattr(names, "first", None)
    return first(k) if first is not None else sorted(names)[:k]


def listing(names: Collection[str], limit: int = LISTED) -> str:
    """`a, b, c ...`: the first `limit` names as given (sorted first by `first_names` for sets)."""
    shown = list(names[:limit]) if isinstance(names, (list, tuple)) else first_names(names, limit)
    return ", ".join(shown) + (" ..." if len(names) > limit else "")
