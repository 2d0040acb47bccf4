"""The migration runner: applies `migrations/NNNN_*.sql` in order, each in its own transaction, under a
session advisory lock, so two daemons (or `db migrate` and a daemon) starting together apply each file once.

The runner also creates the step_attempts partitions ahead (the daemon calls it at start), because a
migrated database without the current month's partition would push every attempt into the default partition.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from ..errors import E_DB_SCHEMA, A44Error
from .queries import load_migrations, sql

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


async def migrate(conn: asyncpg.Connection, now: datetime) -> MigrationReport:
    """Bring the `automation` schema up to date on `conn` (a plain connection, not in a transaction)."""
    version = await conn.fetchval(sql("server_version"))
    if version < MIN_SERVER_VERSION:
        raise A44Error(E_DB_SCHEMA, f"PostgreSQL {version // 10000} is too old; a44 needs PostgreSQL 14 or later")
    report = MigrationReport()
    known = load_migrations()
    await conn.execute(sql("migration_lock"))
    try:
        await conn.execute(sql("migration_bootstrap"))
        applied = {r["number"]: r for r in await conn.fetch(sql("migration_applied"))}
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
                await conn.execute(m.sql)
                await conn.execute(sql("migration_record"), m.number, m.name, _sha(m.sql), now)
            report.applied.append(m.name)
        report.partitions_created = await ensure_partitions(conn, now)
    finally:
        await conn.execute(sql("migration_unlock"))
    return report


async def ensure_partitions(conn: asyncpg.Connection, now: datetime,
                            months_ahead: int = PARTITION_MONTHS_AHEAD) -> int:
    return await conn.fetchval(sql("partitions_ensure"), now, months_ahead)
