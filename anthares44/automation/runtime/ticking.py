"""`tick_loop`: the loop of a service that ticks beside the daemon (the scheduler, the buffer flusher): tick, then
sleep until the instant the tick says is next (an alarm of the injected clock, so a VirtualClock drives it) or
`poll_s` of wall time, whichever comes first; a failed tick (the database away, or a bug) is retried with the
reconnect backoff and never ends the loop. The poll and the backoff are wall time: a trigger published, a run
ended or the database back are events of the outside world, not instants of the clock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from ..clock import Clock, wait_event
from ..durations import reconnect_delay
from ..errors import A44Error
from .outage import OUTAGE


async def tick_loop(store, clock: Clock, stop: asyncio.Event, tick: Callable[[], Awaitable[datetime | None]],
                    poll_s: float, name: str, log: logging.Logger) -> None:
    """Until `stop`: `await tick()` (which answers the instant to wake at, None: none) and sleep."""
    failures = 0
    while not stop.is_set():
        began = time.monotonic()     # wall: how long an outage lasted, in real seconds (runtime/outage.py)
        wake_at, wait_s = None, poll_s
        try:
            wake_at = await tick()
            failures = 0
            OUTAGE.ok(store.url, began)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the database went away, or a bug: keep the daemon alive
            failures += 1
            wait_s = reconnect_delay(failures)
            if isinstance(exc, A44Error):
                if not OUTAGE.failed(store.url, name, exc):
                    log.debug("%s: %s; retrying in %.1fs", name, exc, wait_s)
            else:
                log.exception("%s: unexpected error; retrying in %.1fs", name, wait_s)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                await wait_event(clock, stop, wake_at)
