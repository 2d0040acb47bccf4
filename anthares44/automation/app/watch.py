"""Waking up when something happens to a run: one LISTEN connection on channel `a44_run_events`, shared by every
waiter of an `Automation`.

Every insert into `automation.run_events` notifies that channel with the run id (migration 0001), so `run --wait`
and `logs --follow` sleep until their run has news instead of polling. A notification only says "read again";
the reader resumes from the last `run_events.id` it saw, so a notification lost (or merged by PostgreSQL within
one transaction) costs nothing but a short delay: waiters also re-check every `SAFETY_RECHECK_S` in case the
LISTEN connection died silently.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

CHANNEL = "a44_run_events"
SAFETY_RECHECK_S = 5.0
ANY_RUN = "*"     # watch(ANY_RUN) wakes on news of every run (the console's runs page)


class Wakeup:
    """Set when the watched run has a new event; `wait` clears it, so news arriving while the caller reads the
    log is not lost: the next `wait` returns at once."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, timeout: float | None = SAFETY_RECHECK_S) -> bool:
        """True when woken by a notification, False when `timeout` passed first."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._event.clear()


class RunListener:
    """Holds the LISTEN connection (taken from the store's pool on first use) and routes notifications to the
    waiters registered for that run id."""

    def __init__(self, store) -> None:
        self._store = store
        self._waiters: dict[str, set[Wakeup]] = {}
        self._conn_cm = None
        self._conn = None
        self._lock = asyncio.Lock()

    async def _ensure_listening(self) -> None:
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return
            self._conn_cm = self._store.connection("listen")
            self._conn = await self._conn_cm.__aenter__()
            try:
                await self._conn.add_listener(CHANNEL, self._on_notify)
            except BaseException:
                await self._release()
                raise

    def _on_notify(self, _conn, _pid, _channel, payload: str) -> None:
        for wake in (*self._waiters.get(payload, ()), *self._waiters.get(ANY_RUN, ())):
            wake.set()

    @asynccontextmanager
    async def watch(self, run_id: str) -> AsyncIterator[Wakeup]:
        """Register before the first read of the run, so nothing between that read and the wait is missed."""
        await self._ensure_listening()
        wake = Wakeup()
        self._waiters.setdefault(run_id, set()).add(wake)
        try:
            yield wake
        finally:
            waiters = self._waiters.get(run_id)
            if waiters is not None:
                waiters.discard(wake)
                if not waiters:
                    del self._waiters[run_id]

    async def _release(self) -> None:
        conn, cm = self._conn, self._conn_cm
        self._conn = self._conn_cm = None
        if conn is not None and not conn.is_closed():
            try:
                await conn.remove_listener(CHANNEL, self._on_notify)
            except Exception:  # noqa: BLE001 - the connection may be gone already; the pool discards it
                pass
        if cm is not None:
            await cm.__aexit__(None, None, None)

    async def close(self) -> None:
        async with self._lock:
            await self._release()
