"""Commit counts that settle (helper of bench_runtime.py): pg_stat_database.xact_commit of a database, read from a
connection to ANOTHER database (`postgres`), so the reader's own transactions are never in the figure, with
stats_fetch_consistency = none (every read is fresh, no snapshot to clear). A backend flushes its counters at exit
and at most once a second while busy, so a figure is settled when two reads 0.5 s apart agree (PostgreSQL 18:
each check used to add its own commits to the database it read, so the old check never agreed and always waited
its full 20 s)."""

from __future__ import annotations

import asyncio
import time

import asyncpg


def admin_url_of(url: str) -> str:
    """The same server's `postgres` database, as the superuser the bench connects as."""
    base = url.rsplit("/", 1)[0]
    if "@" in base:
        scheme, rest = base.split("://", 1)
        base = f"{scheme}://postgres@{rest.split('@', 1)[1]}"
    return base + "/postgres"


async def read_commits(url: str, datname: str) -> int:
    c = await asyncpg.connect(admin_url_of(url))
    try:
        await c.execute("set stats_fetch_consistency = none")
        return int(await c.fetchval("select xact_commit from pg_stat_database where datname = $1", datname))
    finally:
        await c.close()


async def settled_commits(url: str, datname: str | None = None, limit_s: float = 20.0) -> tuple[int, float]:
    """(xact_commit of `datname` (default: the URL's database) once two reads 0.5 s apart agree, seconds it took).
    The reader's commits land in `postgres`, never in the figure: nothing to subtract."""
    datname = datname or url.rsplit("/", 1)[1].split("?")[0]
    t0 = time.monotonic()
    a = await read_commits(url, datname)
    while time.monotonic() - t0 < limit_s:
        await asyncio.sleep(0.5)
        b = await read_commits(url, datname)
        if b == a:
            return b, time.monotonic() - t0
        a = b
    return a, time.monotonic() - t0


def load_average() -> str:
    """The 1-minute load average now (/proc/loadavg)."""
    with open("/proc/loadavg") as f:
        return f.read().split()[0]
