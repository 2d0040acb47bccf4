"""Injectable time: the one place the runtime asks "what time is it?".

Everything that decides on time (leases, retry due times, the 24 h idempotency window, partitions) takes a
`Clock`, so tests move a `ManualClock` instead of sleeping and production uses `SystemClock`.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant as an aware UTC datetime."""


class SystemClock:
    """The wall clock (UTC)."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to; for tests."""

    def __init__(self, start: datetime | None = None):
        start = start or datetime(2026, 7, 19, 14, 2, 11, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta | float) -> datetime:
        """Move forward by a timedelta or a number of seconds; returns the new instant."""
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        if delta < timedelta(0):
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += delta
            return self._now

    def set(self, instant: datetime) -> None:
        if instant.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        with self._lock:
            self._now = instant.astimezone(UTC)
