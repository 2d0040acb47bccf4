"""A daemon's heartbeat (migration 0013): its row in `automation.daemons`, refreshed every HEARTBEAT_EVERY while
it serves and marked stopped at a clean shutdown, so the verbs that create or list runs can say "no daemon has been
seen for 12 min" instead of leaving runs `pending` in silence (`presence`). A failed beat is never fatal: the claim
loop reports the database's absence on its own."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

HEARTBEAT_EVERY = timedelta(seconds=10)
LIVE_WITHIN = HEARTBEAT_EVERY * 3      # a daemon not seen for this long is taken for gone


@lru_cache(maxsize=1)
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("anthares44-automation")
    except PackageNotFoundError:
        return "unknown"


async def beat(store, worker_id: str, in_flight: int, now: datetime) -> None:
    await store.execute("daemon_heartbeat", worker_id=worker_id, host=socket.gethostname(), pid=os.getpid(),
                        version=_version(), in_flight=in_flight, now=now)


async def stopped(store, worker_id: str, now: datetime) -> None:
    await store.execute("daemon_stopped", worker_id=worker_id, now=now)


@dataclass(frozen=True)
class Presence:
    """Whether a daemon serves this database now, and the last one seen."""
    live: int                      # daemons seen within LIVE_WITHIN and not stopped
    last: dict | None              # the most recently seen daemon, if any ever ran
    now: datetime

    def warning(self) -> str | None:
        """One line for a user whose runs would wait: None while a daemon is live."""
        if self.live:
            return None
        then = "no daemon has ever served this database"
        if self.last is not None:
            ago = int((self.now - self.last["last_seen_at"]).total_seconds())
            how = "stopped" if self.last["stopped_at"] is not None else "last seen"
            then = (f"no daemon is serving this database (worker {self.last['worker_id']} {how} "
                    f"{_ago(ago)} ago)")
        return f"{then}: runs wait in `pending` until `a44 automation serve` runs"


def _ago(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


async def presence(store) -> Presence:
    now = store.clock.now()
    rows = [dict(r) for r in await store.fetch("daemons_list", limit=50)]
    live = sum(1 for r in rows if r["stopped_at"] is None and now - r["last_seen_at"] <= LIVE_WITHIN)
    return Presence(live, rows[0] if rows else None, now)
