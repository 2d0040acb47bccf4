"""Durable timers fired in sets (§19, docs/timers.md "Firing at volume", migration 0035 (0041 once merged)): `fire_due(store, now)`
fires the due sleeps of runs no worker holds in one statement per batch, and `TimerFiring` is the daemon's task
that does so at each timer's instant.

A timer fired inside a visit costs a claim, a read of the run's history and a commit of its own; at 100,000 timers
due in the same seconds they queue behind one another. Here a batch of up to BATCH fires in one statement (each
run's row locked FOR UPDATE SKIP LOCKED, the lock of the claim, the fence and `timer_move`; the attempt finished
only while still `running` with the instant it was read with), so two daemons, a visit and a person's wake never
fire one timer twice. The run stays `sleeping` and due: the next claim drives its next step, as capacity allows
-- the fire's lateness no longer waits for it. A run a worker holds is fired by its visit (sleeps.py), as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from ...clock import Clock, wait_event
from ...errors import A44Error
from ..store.core import Store

log = logging.getLogger("a44.engine")

BATCH = 2000                        # most timers one statement fires (~15-40 ms of database work)
BEHIND = 500                        # a batch this large: timers are overdue (not just the instant's share)
YIELD = 1.0                         # at most this long (wall) a claim holds off for firing to catch up
LANES = 2                           # batches in flight at once while behind (SKIP LOCKED keeps them disjoint)
RECHECK = timedelta(seconds=1)      # a wall-time look even when no instant is known (a sleep opened elsewhere)


async def fire_due(store: Store, now: datetime, limit: int = BATCH) -> int:
    """Fire up to `limit` due sleeps of released runs at `now`, in one statement. Returns how many fired."""
    return int(await store.fetchval("timer_fire_due", now=now, limit=limit) or 0)


class TimerFiring:
    """The daemon's timer task: fire what is due, batch after batch while batches come back full, then wait
    until the earliest open sleep's instant (at most RECHECK of wall time: a sleep another daemon opened, a
    reschedule) or a hint. `fire(limit)` is Engine.fire_timers; `fired(n)` is told of each batch that fired some
(the daemon wakes its claim loop: those runs are due for their next step)."""

    def __init__(self, store: Store, clock: Clock, fire: Callable[[int], Awaitable[int]],
                 fired: Callable[[int], None], limit: int = BATCH):
        self.store, self.clock, self.fire, self.fired, self.limit = store, clock, fire, fired, limit
        self.hint = asyncio.Event()
        # set while firing keeps up (the last batch was below BEHIND); cleared while timers are overdue, when the
        # daemon's claim loop yields the database to firing (see caught_up): both compete for the same cores,
        # and a fire (one row of a set UPDATE) costs a fraction of the visit it makes due
        self.keeping_up = asyncio.Event()
        self.keeping_up.set()

    async def caught_up(self) -> None:
        """Wait (at most YIELD of wall time) until firing keeps up with the due timers. The claim loop calls it
        before claiming: during a flood of due timers the fires go first, the visits they make due follow (the
        next steps would queue behind the cores anyway); never longer than YIELD, so no run starves."""
        if self.keeping_up.is_set():
            return
        try:
            async with asyncio.timeout(YIELD):
                await self.keeping_up.wait()
        except TimeoutError:
            pass

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.hint.clear()
            try:
                # behind: a batch per lane at once, each on its own connection; they take disjoint timers (the
                # due attempts are locked SKIP LOCKED as read), so a backlog drains on every core the server has
                lanes = 1 if self.keeping_up.is_set() else LANES
                counts = await asyncio.gather(*(self.fire(self.limit) for _ in range(lanes)))
                n = sum(counts)
                if max(counts) >= min(BEHIND, self.limit):
                    self.keeping_up.clear()
                else:
                    self.keeping_up.set()
                if n:
                    self.fired(n)
                if max(counts) >= self.limit:
                    continue        # a full batch: more are probably due right now
                nxt = await self.store.fetchval("timer_next_due", now=self.clock.now())
            except A44Error as exc:     # the database is away: the claim loop reports it; look again later
                self.keeping_up.set()   # nothing to yield to
                log.debug("timer firing: %s", exc)
                nxt = None
            try:
                async with asyncio.timeout(RECHECK.total_seconds()):
                    await wait_event(self.clock, self.hint, nxt)
            except TimeoutError:
                pass
