"""Injectable time: the one place the runtime asks "what time is it?" and "wake me at that instant".

Everything that decides on time (leases, retry due times, the 24 h idempotency window, partitions, sleeps) takes a
`Clock`; every wait of a daemon loop for an instant (the next due run, the next schedule firing, a lease renewal,
an alert window) asks the same clock for an `alarm`, so a test kit that moves a `VirtualClock` drives the real
engine through days in milliseconds, and production uses `SystemClock`.

Only time the outside world imposes stays on the wall clock: a connector call's own timeout (a far side answers
in real seconds), the pacing of notifications between processes. Instants are aware UTC datetimes.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
from collections.abc import Awaitable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant as an aware UTC datetime."""

    def alarm(self, instant: datetime) -> asyncio.Future[None]:
        """A future of the running loop that completes when this clock reaches `instant` (at once if it has).
        Cancel it when no longer needed: that releases what it holds."""


def _ring(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class SystemClock:
    """The wall clock (UTC); alarms are the event loop's timers."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def alarm(self, instant: datetime) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        delay = (instant - self.now()).total_seconds()
        if delay <= 0:
            fut.set_result(None)
            return fut
        handle = loop.call_later(delay, _ring, fut)
        fut.add_done_callback(lambda _f: handle.cancel())
        return fut


class VirtualClock:
    """A clock that only moves when told to (`advance`, `set`), for tests and the test kit: alarms ring when it
    passes their instant, in instant order, on the loop that asked for them (thread-safe: a test's thread may move
    the clock while a daemon's loop waits). `next_alarm()` says when the earliest waiting loop wants to wake, so a
    driver can jump straight there."""

    def __init__(self, start: datetime | None = None):
        start = start or datetime(2026, 7, 19, 14, 2, 11, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("VirtualClock needs an aware datetime")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()
        self._alarms: list[tuple[datetime, int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def alarm(self, instant: datetime) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if instant <= self._now:
                fut.set_result(None)
            else:
                heapq.heappush(self._alarms, (instant, next(self._seq), loop, fut))
        return fut

    def next_alarm(self) -> datetime | None:
        """The instant of the earliest alarm still waited for (None: no loop waits on this clock)."""
        with self._lock:
            while self._alarms and self._alarms[0][3].done():
                heapq.heappop(self._alarms)
            return self._alarms[0][0] if self._alarms else None

    def advance(self, delta: timedelta | float) -> datetime:
        """Move forward by a timedelta or a number of seconds; returns the new instant."""
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        if delta < timedelta(0):
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += delta
            now = self._now
        self._ring_due(now)
        return now

    def set(self, instant: datetime) -> None:
        if instant.tzinfo is None:
            raise ValueError("VirtualClock needs an aware datetime")
        with self._lock:
            self._now = instant.astimezone(UTC)
            now = self._now
        self._ring_due(now)

    def _ring_due(self, now: datetime) -> None:
        due = []
        with self._lock:
            while self._alarms and self._alarms[0][0] <= now:
                due.append(heapq.heappop(self._alarms))
        for _, _, loop, fut in due:
            if fut.done():
                continue
            try:
                loop.call_soon_threadsafe(_ring, fut)
            except RuntimeError:      # the loop that asked has closed: nobody waits any more
                pass


ManualClock = VirtualClock    # the name the tests have used since the first clock


async def sleep_until(clock: Clock, instant: datetime) -> None:
    """Return when `clock` reaches `instant`."""
    fut = clock.alarm(instant)
    try:
        await fut
    finally:
        fut.cancel()


async def sleep_for(clock: Clock, seconds: float) -> None:
    """Return when `clock` has moved `seconds` from now."""
    await sleep_until(clock, clock.now() + timedelta(seconds=max(0.0, seconds)))


async def wait_until(clock: Clock, aws: Iterable[Awaitable[Any]], instant: datetime | None) -> set[asyncio.Future[Any]]:
    """`asyncio.wait(aws, return_when=FIRST_COMPLETED)` that also returns when `clock` reaches `instant` (None: no
    limit). Returns the completed ones of `aws` (empty: the instant came first). Nothing in `aws` is cancelled."""
    futs = {asyncio.ensure_future(a) for a in aws}
    alarm = clock.alarm(instant) if instant is not None else None
    try:
        done, _ = await asyncio.wait(futs | ({alarm} if alarm is not None else set()),
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        if alarm is not None:
            alarm.cancel()
    done.discard(alarm)
    return done


async def wait_event(clock: Clock, event: asyncio.Event, instant: datetime | None) -> bool:
    """Wait for `event` until `clock` reaches `instant`; True when the event was set."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        return bool(await wait_until(clock, [waiter], instant))
    finally:
        waiter.cancel()
