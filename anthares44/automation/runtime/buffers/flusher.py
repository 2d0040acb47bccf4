"""`BufferFlusher`: flushes the debounce and batch buffers that come due on the engine's clock (§22).

A tick takes due buffers one transaction each: `flow_buffer_take_due` locks the earliest open buffer whose
`due_at` has come, skipping locked ones (another daemon flushing it, or an ingestion adding to it, which moves
its due instant anyway), and `flush` closes it and starts its run in that transaction. Two daemons never flush
one buffer twice: the lock serialises them and the transition is conditional (`where state = 'open'`).

The reason recorded: `maxWait` when the buffer was due at first + maxWait, else `quiet` (a debounce whose key
went quiet; a batch always ends on maxWait unless it filled first, which the ingestion flushes inline).

`serve(stop)` loops: tick, then sleep until the earliest due instant (an alarm of the injected clock, so a
VirtualClock drives it) or `poll` of wall time, whichever first: an ingestion that opens a buffer due earlier than
the one the loop sleeps towards is found within `poll`. The test kit ticks it in `settle` and asks `next_wake`.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from ...clock import Clock
from ..ticking import tick_loop
from .flush import flush

log = logging.getLogger("a44.flow")
DEFAULT_POLL_S = 0.5
MAX_PER_TICK = 1000         # flushes of one tick before the loop looks at its stop event again


class BufferFlusher:
    def __init__(self, store, *, clock: Clock | None = None, poll_s: float = DEFAULT_POLL_S):
        self.store = store
        self.clock = clock or store.clock
        self.poll_s = poll_s

    async def flush_one(self) -> tuple[str, str | None] | None:
        """Flush the earliest due buffer: (buffer_id, run_id), or None when none is due (or all are locked)."""
        async with self.store.transaction("flow_buffer_flush") as conn:
            now = self.clock.now()
            row = await conn.fetchrow("flow_buffer_take_due", now=now)
            if row is None:
                return None
            reason = "maxWait" if row["due_at"] >= row["max_due_at"] else "quiet"
            return row["buffer_id"], await flush(conn, row["buffer_id"], reason, now)

    async def tick(self) -> list[str]:
        """Flush every buffer due now; the runs started."""
        runs: list[str] = []
        for _ in range(MAX_PER_TICK):
            done = await self.flush_one()
            if done is None:
                break
            if done[1] is not None:
                runs.append(done[1])
        return runs

    async def next_wake(self) -> datetime | None:
        """The earliest instant an open buffer is due (None: no buffer is open)."""
        due: datetime | None = await self.store.fetchval("flow_buffer_next_due")
        return due

    async def serve(self, stop: asyncio.Event) -> None:
        async def tick() -> datetime | None:
            await self.tick()
            return await self.next_wake()
        await tick_loop(self.store, self.clock, stop, tick, self.poll_s, "buffers", log)
