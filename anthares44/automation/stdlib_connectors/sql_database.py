"""The databases workflow SQL runs on (§14, §17): the application database, or a DSN a step names; never the
control store.

`AppDatabase` is the workflow's default database (`A44_APP_DATABASE_URL`, or the embedded server's `a44_app`):
the engine hands it to `sql/execute` as `ctx.services["app_db"]`. With none configured a step without a
connection fails with E_SQL_NO_DATABASE; nothing falls back to the store's pool, which connectors never get.

Every connection to a workflow database passes the wall below when it is made (asyncpg's pool `init`), whatever
its URL came from: refused with E_SQL_UNSAFE_DATABASE when the database holds the `automation` schema (it is a
control store) or when its role is a superuser, may create roles or replicate, or is a member of
pg_execute_server_program / pg_read_server_files / pg_write_server_files (shell commands and files on the host).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from ..errors import E_SQL_NO_DATABASE, E_SQL_UNSAFE_DATABASE, A44Error
from ..named_sql import load_file

APP_DATABASE_ENV = "A44_APP_DATABASE_URL"
# the wall's query runs on the workflow's database, so it lives with this connector, not with the store's
_GUARD = load_file(Path(__file__).with_name("workflow_db.sql"))["workflow_db_guard"].sql


def unsafe_reasons(row) -> list[str]:
    """Why a connection described by the `workflow_db_guard` row must not run workflow SQL (empty: it may)."""
    reasons = []
    if row["control_schema"]:
        reasons.append("it holds the `automation` schema (a control store)")
    for flag, what in (("superuser", "is a superuser"), ("createrole", "may create roles"),
                       ("replication", "may start replication")):
        if row[flag]:
            reasons.append(f"its role {row['role']} {what}")
    if row["server_roles"]:
        reasons.append(f"its role {row['role']} is a member of {', '.join(row['server_roles'])}")
    return reasons


async def _init_connection(conn) -> None:
    row = await conn.fetchrow(_GUARD)
    reasons = unsafe_reasons(row)
    if reasons:
        raise A44Error(E_SQL_UNSAFE_DATABASE,
                       f"workflow SQL may not run on database {row['database']}: " + "; ".join(reasons),
                       hint=f"point {APP_DATABASE_ENV} (or the connection's dsnSecretRef) at a database of its own "
                            "with a login role that has no server-level powers (docs/store.md)",
                       details={"database": row["database"], "role": row["role"]})
    # decode json/jsonb into values, as the store's pool does; parameters arrive already encoded as JSON text
    # (sql_values.adapt_params)
    for typ in ("jsonb", "json"):
        await conn.set_type_codec(typ, encoder=str, decoder=json.loads, schema="pg_catalog")


class Pools:
    """asyncpg pools of workflow databases, made on first use: one per (event loop, DSN), closed by `aclose()`."""

    def __init__(self) -> None:
        self._pools: dict[tuple[int, str], Any] = {}

    async def get(self, dsn: str):
        key = (id(asyncio.get_running_loop()), dsn)
        pool = self._pools.get(key)
        if pool is None:
            import asyncpg

            pool = await asyncpg.create_pool(dsn, min_size=0, max_size=4, init=_init_connection,
                                             server_settings={"application_name": "a44-sql-execute"})
            self._pools[key] = pool
        return pool

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            try:
                await pool.close()
            except RuntimeError:
                pool.terminate()  # made on a loop that has since closed


class AppDatabase:
    """The application database by URL (None: not configured), behind the same wall as any workflow database."""

    def __init__(self, url: str | None):
        self.url = url
        self._pools = Pools()

    async def pool(self):
        if not self.url:
            raise A44Error(E_SQL_NO_DATABASE,
                           "this sql/execute step names no database (no dsnSecretRef, no declared connection) and "
                           "no application database is configured",
                           hint=f"set {APP_DATABASE_ENV} to a PostgreSQL database for workflows, or declare a "
                                "connection with a dsnSecretRef; the control store (A44_DATABASE_URL) is never used")
        return await self._pools.get(self.url)

    async def aclose(self) -> None:
        await self._pools.aclose()
