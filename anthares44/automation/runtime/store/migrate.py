"""The migration runner: applies `migrations/NNNN_*.sql` in order, each in its own transaction under a
transaction advisory lock (and checked again under it), so two daemons (or `db migrate` and a daemon) starting
together apply each file once. No session state: it works through a transaction pooler (pooler.py).

A database migrated by a newer a44 is used as long as its migrations still accept this package's schema, and a
destructive migration is applied only when asked (`db migrate`) or on an empty database, never by a daemon's start
or a verb's on-demand migration while older daemons may still run (compat.py, docs/store.md "Rolling upgrades").

The runner also creates the step_attempts partitions ahead (the daemon calls it at start), because a
migrated database without the current month's partition would push every attempt into the default partition.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...errors import E_DB_SCHEMA, A44Error
from . import compat
from .vocabulary import load_migrations

if TYPE_CHECKING:
    from .session import Session

MIN_SERVER_VERSION = 150000   # 14 reached its end of life in November 2026; 15 is the oldest CI tests (docs/store.md)
PARTITION_MONTHS_AHEAD = 2  # current month + 2: a daemon running for weeks never reaches the default partition


@dataclass
class MigrationReport:
    applied: list[str] = field(default_factory=list)  # applied by this call
    already: list[str] = field(default_factory=list)  # found applied
    changed: list[str] = field(default_factory=list)  # applied, but the file differs now (edited after release)
    newer: list[int] = field(default_factory=list)  # applied by a newer a44 that still accepts this daemon
    partitions_created: int = 0


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def migrate(conn: Session, now: datetime, *, destructive: bool = False) -> MigrationReport:
    """Bring the `automation` schema up to date on `conn` (a store session, not in a transaction), or refuse
    (E_DB_SCHEMA_RANGE) a schema outside this package's range. A destructive migration pending is applied only with
    `destructive` (`db migrate`) or on an empty database; else it is refused."""
    version = await conn.fetchval("server_version")
    if version < MIN_SERVER_VERSION:
        raise A44Error(E_DB_SCHEMA, f"PostgreSQL {version // 10000} is too old; a44 needs PostgreSQL 15 or later")
    report = MigrationReport()
    known = load_migrations()
    daemon = known[-1].number
    async with conn.transaction():
        await conn.execute("migration_lock")
        await conn.execute("migration_bootstrap")
    applied = {r["number"]: r for r in await conn.fetch("migration_applied")}
    report.newer = sorted(set(applied) - {m.number for m in known})
    if report.newer:
        await _accepts_newer(conn, applied, daemon)
    for m in known:
        if m.number in applied:
            report.already.append(m.name)
            if applied[m.number]["sha256"] != _sha(m.sql):
                report.changed.append(m.name)
            continue
        mark = compat.destructive_mark(m)
        if mark is not None and not destructive and applied:
            raise compat.held_back(max(applied, default=0), m, mark, daemon)
        async with conn.transaction():
            await conn.execute("migration_lock")
            if await conn.fetchval("migration_is_applied", number=m.number):
                report.already.append(m.name)     # another process applied it meanwhile
                continue
            await conn.apply(m)
            await conn.execute("migration_record", number=m.number, name=m.name, sha256=_sha(m.sql), now=now)
            if await conn.fetchval("schema_compat_ready"):
                await conn.execute("schema_compat_record", number=m.number, name=m.name,
                                   min_daemon=mark.min_daemon if mark else 0,
                                   destructive=mark.what if mark else None)
        report.applied.append(m.name)
    need = await conn.fetchrow("schema_compat_need") if await conn.fetchval("schema_compat_ready") else None
    if need is not None and need["min_daemon_schema"] > daemon:
        raise compat.too_new(max([*applied, daemon]), dict(need), daemon)
    report.partitions_created = await ensure_partitions(conn, now)
    return report


async def _accepts_newer(conn: Session, applied: dict[int, Any], daemon: int) -> None:
    """The database has migrations this package does not know: fine while they accept its daemon's schema."""
    unknown = sorted(n for n in applied if n > daemon)
    missing = [n for n in range(1, daemon + 1) if n not in applied]     # a newer a44 applied all of ours first
    why = (f"and lacks {missing} of its own" if missing else "")
    if why or not await conn.fetchval("schema_compat_ready"):
        raise A44Error(E_DB_SCHEMA, f"the database has migrations {unknown} that this package does not know "
                                    f"{why or 'and records no schema range'}: it was migrated by another a44",
                       hint="upgrade anthares44-automation, or point A44_DATABASE_URL at another database")
    need = await conn.fetchrow("schema_compat_need")
    if need is not None and need["min_daemon_schema"] > daemon:
        raise compat.too_new(max(applied), dict(need), daemon)


def log_migrated(report: MigrationReport) -> MigrationReport:
    """One lifecycle line saying what a process's migration at start did."""
    log = logging.getLogger("a44.lifecycle")
    if report.applied:
        log.info("migrated: applied %s (%d already applied)", ", ".join(report.applied), len(report.already))
    else:
        log.info("migrated: schema up to date (%d migrations)", len(report.already))
    log.info("schema range: %s", compat.describe_range(compat.daemon_schema()))
    if report.changed:
        log.warning("migrations %s were edited after they were applied", ", ".join(report.changed))
    if report.newer:
        log.info("the database is at schema %d, newer than this daemon's %d: its migrations %s still accept this "
                 "daemon (additive)", report.newer[-1], compat.daemon_schema(), ", ".join(map(str, report.newer)))
    return report


async def ensure_partitions(conn: Session, now: datetime,
                            months_ahead: int = PARTITION_MONTHS_AHEAD) -> int:
    created: int = await conn.fetchval("partitions_ensure", now=now, months_ahead=months_ahead)
    return created
