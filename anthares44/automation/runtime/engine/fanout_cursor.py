"""Which partitions of a fan-out step may start next, at a cost that follows the partitions in flight, not the
step's size (docs/partitions.md, "Costs"): a visit of a 100,000-item step asks "what next?" once per completion,
and rescanning every partition each time made the step quadratic.

The cursor walks the partitions in plan order once (`head`); a partition it has passed and that is not final yet
(started, retrying, interrupted, waiting for another run's lock) is kept in `open`, by ordinal, and looked at
again on every ask until it is final. Final partitions (done, or failed for good) are counted, never looked at
again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from .progress import PartProgress


def _final(pp: PartProgress) -> bool:
    return pp.done or pp.state == "failed"


class Cursor:
    """The partitions of one fan-out step still to look at, within one visit."""

    def __init__(self, parts: list[PartProgress]):
        self.parts = parts
        self.head = 0                                   # parts[:head] are final or in `open`
        self.open: dict[int, PartProgress] = {}         # ordinal -> a passed partition not final yet

    def candidates(self, busy: set[str], now: datetime, dues: list) -> Callable[[int], list[PartProgress]]:
        """A `pull(n)` for the lock gate: up to n partitions that may start now, open ones first (lowest ordinal
        first), then new ones from `head`; a retry not due yet adds its due time to `dues`."""
        revisit = iter(sorted(self.open))

        def ready(pp: PartProgress) -> bool:
            if pp.key in busy or _final(pp):
                return False
            due = pp.last.retry_at if pp.last is not None else None
            if pp.state == "retry" and due is not None and now < due:
                dues.append((due, "waiting"))
                return False
            return True

        def pull(n: int) -> list[PartProgress]:
            out: list[PartProgress] = []
            for o in revisit:
                pp = self.open[o]
                if _final(pp):
                    del self.open[o]
                elif ready(pp):
                    out.append(pp)
                    if len(out) == n:
                        return out
            while self.head < len(self.parts) and len(out) < n:
                pp = self.parts[self.head]
                self.head += 1
                if _final(pp):
                    continue
                self.open[pp.ordinal] = pp
                if ready(pp):
                    out.append(pp)
            return out

        return pull

    def finished(self) -> bool:
        """Every partition is final (the step can end once nothing is in flight)."""
        if self.head < len(self.parts):
            return False
        for o in [o for o, pp in self.open.items() if _final(pp)]:
            del self.open[o]
        return not self.open
