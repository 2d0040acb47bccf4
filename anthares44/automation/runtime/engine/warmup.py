"""The daemon's warm-up: before it says it is serving, every connection of its pool is open and has run the
statements of the one-run-at-a-time path once, in a form that writes nothing.

A fresh connection costs a connect and authentication, then, per statement text, a prepare round trip (asyncpg
caches statements per connection) and PostgreSQL's first planning of it and of the PL/pgSQL functions it calls
(plans are cached per backend). Paid by the first runs, that pushed the p99 of the first ~20 runs after a start
to 170-200 ms (issue 16). The claim asks for no run (limit 0: no candidate, nothing parked), the notify sends
nothing, and `engine_commit` is fenced off (no run has an empty id) with the SQLSTATE the journal maps to
`LeaseLost`, after its plan is made. The built-in connectors are loaded too, and those with a `warm()` (`http`:
its client session, whose import and TLS context cost the first request 0.1-0.5 s) make what they make lazily,
when a published workflow uses them.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta

import asyncpg

from ..store.core import Store
from ..store.session import Session

CONNECTORS = ("pass", "http", "sql/execute")      # the built-ins a first run most likely calls
FENCED = "A44LL"       # engine_commit's "not leased to you" (0018): the expected answer to a run that is none


async def warm(store: Store, worker_id: str, connections: int, now: datetime) -> int:
    """Open `connections` pooled connections at once and run the hot statements on each. Returns how many."""
    async with contextlib.AsyncExitStack() as stack:
        sessions = await asyncio.gather(*(stack.enter_async_context(store.session("warmup", session_neutral=True))
                                          for _ in range(connections)))
        await asyncio.gather(*(_run_hot_path(s, worker_id, now) for s in sessions))
    return len(sessions)


async def _run_hot_path(s: Session, worker_id: str, now: datetime) -> None:
    await s.fetch("lease_claim", worker_id=worker_id, now=now, limit=0, lease=timedelta(0), park_until=now)
    await s.fetchval("lease_next_due")
    await s.fetchval("engine_notify", run_ids=[], due_ms=None)
    try:
        await s.fetchval("engine_commit", run_id="", owner=worker_id, grant=-1, current_step=None, now=now, ops="[]")
    except asyncpg.PostgresError as exc:
        if exc.sqlstate != FENCED:
            raise


async def used_types(store: Store) -> set[str]:
    """The connector types the published workflows call (any version, steps and compensations)."""
    return {r["type"] for r in await store.fetch("published_connector_types")}


def warm_connectors(registry, used: set[str] | None = None) -> None:
    """Load the usual built-in connectors and let each make, on the running loop, what it makes on first use:
    only those some published workflow uses when `used` is given. The http client (aiohttp) is ~10 MB of an idle
    daemon's memory: a store whose workflows call no http connector does not pay for it (issue 32); one published
    later pays the import on its first request."""
    for name in CONNECTORS:
        if used is not None and name not in used:
            continue
        warm = getattr(registry.get(name), "warm", None)
        if warm is not None:
            warm()
