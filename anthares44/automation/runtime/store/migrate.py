"""The migration runner: applies `migrations/NNNN_*.sql` in order, each in its own transaction under a
transaction advisory lock (and checked again under it), so two daemons (or `db migrate` and a daemon) starting
together apply each file once. No session state: it works through a transaction pooler (pooler.py).

The runner also creates the step_attempts partitions ahead (the daemon calls it at start), because a
migrated database without the current month's partition would push every attempt into the default partition.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from ...errors import E_DB_SCHEMA, A44Error
from .vocabulary import load_migrations

if TYPE_CHECKING:
    from .core import Session

MIN_SERVER_VERSION = 140000
PARTITION_MONTHS_AHEAD = 2  # current month + 2: a daemon running for weeks never reaches the default partition


@dataclass
class MigrationReport:
    applied: list[str] = field(default_factory=list)  # applied by this call
    already: list[str] = field(default_factory=list)  # found applied
    changed: list[str] = field(default_factory=list)  # applied, but the file differs now (edited after release)
    partitions_created: int = 0


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def migrate(conn: Session, now: datetime) -> MigrationReport:
    """Bring the `automation` schema up to date on `conn` (a store session, not in a transaction)."""
    version = await conn.fetchval("server_version")
    if version < MIN_SERVER_VERSION:
        raise A44Error(E_DB_SCHEMA, f"PostgreSQL {version // 10000} is too old; a44 needs PostgreSQL 14 or later")
    report = MigrationReport()
    known = load_migrations()
    async with conn.transaction():
        await conn.execute("migration_lock")
        await conn.execute("migration_bootstrap")
    applied = {r["number"]: r for r in await conn.fetch("migration_applied")}
    unknown = sorted(set(applied) - {m.number for m in known})
    if unknown:
        raise A44Error(E_DB_SCHEMA, f"the database has migrations {unknown} that this package does not know: "
                                    f"it was migrated by a newer a44",
                       hint="upgrade anthares44-automation, or point A44_DATABASE_URL at another database")
    for m in known:
        if m.number in applied:
            report.already.append(m.name)
            if applied[m.number]["sha256"] != _sha(m.sql):
                report.changed.append(m.name)
            continue
        async with conn.transaction():
            await conn.execute("migration_lock")
            if await conn.fetchval("migration_is_applied", number=m.number):
                report.already.append(m.name)     # another process applied it meanwhile
                continue
            await conn.apply(m)
            await conn.execute("migration_record", number=m.number, name=m.name, sha256=_sha(m.sql), now=now)
        report.applied.append(m.name)
    report.partitions_created = await ensure_partitions(conn, now)
    return report


def log_migrated(report: MigrationReport) -> MigrationReport:
    """One lifecycle line saying what a process's migration at start did."""
    log = logging.getLogger("a44.lifecycle")
    if report.applied:
        log.info("migrated: applied %s (%d already applied)", ", ".join(report.applied), len(report.already))
    else:
        log.info("migrated: schema up to date (%d migrations)", len(report.already))
    if report.changed:
        log.warning("migrations %s were edited after they were applied", ", ".join(report.changed))
    return report


async def ensure_partitions(conn: Session, now: datetime,
                            months_ahead: int = PARTITION_MONTHS_AHEAD) -> int:
    created: int = await conn.fetchval("partitions_ensure", now=now, months_ahead=months_ahead)
    return created
