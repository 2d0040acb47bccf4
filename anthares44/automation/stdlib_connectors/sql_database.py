"""The databases workflow SQL runs on (§14, §17): each project's own application database, or a DSN a step names;
never the control store, never another project's database.

`AppDatabase` is the engine's `ctx.services["app_db"]`: `pool(project)` gives the pool of that project's database,
one pool per project (at most `POOL_MAX` connections, none kept while idle), so a project can neither take another's
connections nor share a session with it. Where a project's database is comes from a `ProjectLocator`: the embedded
server's (runtime/postgres/projects.py: a role and a database per project, made on first use), or a URL template
`A44_APP_DATABASE_URL` with `{project}` (`TemplateLocator`: the operator made them, docs/store.md). With none
configured a step without a connection fails with E_SQL_NO_DATABASE; nothing falls back to the store's pool, which
connectors never get.

Every connection to a workflow database passes the wall below when it is made (asyncpg's pool `init`), whatever its
URL came from: refused with E_SQL_UNSAFE_DATABASE when the database holds the `automation` schema (it is a control
store); when its role is the daemon's control role or a member of it (on any database); when the role is a
superuser, may create roles or replicate, is a member of pg_execute_server_program / pg_read_server_files /
pg_write_server_files (shell commands and files on the host) or of pg_read_all_stats / pg_monitor /
pg_signal_backend (other sessions' statements, or stopping them). A project's application database connection is
also refused when its role owns a database, may create one, is a member of any role, or may connect to another
project's database or the control database (`project_db_isolation`).

The application database's connections pin, in their startup packet, the settings sql/execute relies on (`PINNED`):
startup parameters win over `ALTER ROLE ... SET` and `ALTER DATABASE ... SET`, so a workflow that sets its own role's
`statement_timeout` to 1 ms harms nothing, not even itself, and not only after the next restart.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from ..errors import E_SQL_NO_DATABASE, E_SQL_UNSAFE_DATABASE, A44Error
from .sql_session import pool_reset
from .workflow_db import QUERIES

APP_DATABASE_ENV = "A44_APP_DATABASE_URL"
PROJECT_PLACEHOLDER = "{project}"
CONTROL_ROLE = "a44"            # the embedded server's control role: refused when the daemon names none
POOL_MAX = 4                    # connections of one project's (or one DSN's) pool
IDLE_S = 30.0                   # an idle pooled connection is closed after this long
APPLICATION_NAME = "a44-sql-execute"
# what sql/execute relies on, fixed for the application database's sessions whatever the role or database says:
# names tables without a schema, lets the step's timeout (not the server) end a statement, writes, reads committed
PINNED = {"application_name": APPLICATION_NAME, "search_path": "public", "statement_timeout": "0",
          "lock_timeout": "0", "idle_in_transaction_session_timeout": "60s", "idle_session_timeout": "0",
          "default_transaction_read_only": "off", "default_transaction_isolation": "read committed"}
_QUERIES = QUERIES
_PLAIN_ID = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def project_slug(project: str) -> str:
    """The project's name inside role, database and URL names: its id when that is a lowercase letter then up to 39
    lowercase letters, digits or `_` (`pj_default`), else `_` and 20 hex digits of its sha256 (any other id: an
    identifier-safe name that no plain id can take, since those start with a letter)."""
    if _PLAIN_ID.match(project):
        return project
    return "_" + hashlib.sha256(project.encode()).hexdigest()[:20]


def database_of(url: str) -> str:
    """The database a PostgreSQL URL names (its path)."""
    return unquote(urlsplit(url).path.lstrip("/"))


@dataclass(frozen=True)
class Wall:
    """What the daemon tells the wall about itself: its control role (refused by name and membership on any
    database) and its control database (no project role may connect to it)."""
    control_role: str = CONTROL_ROLE
    control_database: str | None = None


async def _fetch_row(conn, name: str, **values):
    """One query of workflow_db.sql, by name with named values, on a workflow database's connection (the store runs
    every other named query; these run on the workflow's own database, see named_sql.py)."""
    query = _QUERIES[name]
    text = query.sql
    return await conn.fetchrow(text, *(values[p] for p in query.params))


def unsafe_reasons(row) -> list[str]:
    """Why a connection described by the `workflow_db_guard` row must not run workflow SQL (empty: it may)."""
    reasons = []
    if row["control_schema"]:
        reasons.append("it holds the `automation` schema (a control store)")
    if row["control_role"]:
        reasons.append(f"its role {row['role']} is the daemon's control role")
    elif row["control_member"]:
        reasons.append(f"its role {row['role']} is a member of the daemon's control role")
    for flag, what in (("superuser", "is a superuser"), ("createrole", "may create roles"),
                       ("replication", "may start replication")):
        if row[flag]:
            reasons.append(f"its role {row['role']} {what}")
    for key in ("server_roles", "session_roles"):
        if row[key]:
            reasons.append(f"its role {row['role']} is a member of {', '.join(row[key])}")
    return reasons


def isolation_reasons(role: str, row) -> list[str]:
    """Why a project's application database role could reach beyond its project (`project_db_isolation`)."""
    reasons = []
    if row["createdb"]:
        reasons.append(f"its role {role} may create databases")
    if row["owns"]:
        reasons.append(f"its role {role} owns the database(s) {', '.join(row['owns'])}")
    if row["member_of"]:
        reasons.append(f"its role {role} is a member of {', '.join(row['member_of'])}")
    if row["connects_to"]:
        reasons.append(f"its role {role} may connect to {', '.join(row['connects_to'])}")
    return reasons


def _refuse(row, reasons: list[str], hint: str) -> A44Error:
    return A44Error(E_SQL_UNSAFE_DATABASE,
                    f"workflow SQL may not run on database {row['database']}: " + "; ".join(reasons),
                    hint=hint, details={"database": row["database"], "role": row["role"]})


async def _codecs(conn) -> None:
    # decode json/jsonb into values, as the store's pool does; parameters arrive already encoded as JSON text
    # (sql_values.adapt_params)
    for typ in ("jsonb", "json"):
        await conn.set_type_codec(typ, encoder=str, decoder=json.loads, schema="pg_catalog")


async def guard(conn, wall: Wall) -> None:
    """The wall every workflow database connection passes before its first statement (E_SQL_UNSAFE_DATABASE)."""
    row = await _fetch_row(conn, "workflow_db_guard", control_role=wall.control_role)
    reasons = unsafe_reasons(row)
    if reasons:
        raise _refuse(row, reasons, f"point {APP_DATABASE_ENV} (or the connection's dsnSecretRef) at a database of "
                                    "its own with a login role that has no server-level powers (docs/store.md)")
    return row


class Pools:
    """asyncpg pools of workflow databases, made on first use: one per (event loop, key), closed by `aclose()`."""

    def __init__(self) -> None:
        self._pools: dict[tuple[int, str], Any] = {}
        self._making: dict[tuple[int, str], asyncio.Lock] = {}

    async def get(self, dsn: str, *, init: Callable[[Any], Awaitable[None]], key: str | None = None,
                  server_settings: dict[str, str] | None = None):
        k = (id(asyncio.get_running_loop()), key or dsn)
        pool = self._pools.get(k)
        if pool is None:
            async with self._making.setdefault(k, asyncio.Lock()):     # one pool, however many steps ask at once
                pool = self._pools.get(k)
                if pool is None:
                    import asyncpg

                    pool = await asyncpg.create_pool(
                        dsn, min_size=0, max_size=POOL_MAX, max_inactive_connection_lifetime=IDLE_S, init=init,
                        reset=pool_reset, server_settings=server_settings or {"application_name": APPLICATION_NAME})
                    self._pools[k] = pool
        return pool

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            try:
                await pool.close()
            except RuntimeError:
                pool.terminate()  # made on a loop that has since closed

    async def dsn(self, dsn: str, wall: Wall):
        """The pool of a DSN a step names (its dsnSecretRef): the wall only, the role's own settings kept."""
        async def init(conn):
            await guard(conn, wall)
            await _codecs(conn)
        return await self.get(dsn, init=init)


class ProjectLocator(Protocol):
    """Where each project's application database is."""

    def database(self, project: str) -> str:
        """The name of the project's database (no I/O)."""

    async def url(self, project: str) -> str:
        """Its login URL, the role and database made first if this locator makes them."""


class TemplateLocator:
    """`A44_APP_DATABASE_URL` with `{project}` (in the user name, the database name, or both): the operator made a
    role and a database per project (docs/store.md gives the grants); `{project}` becomes `project_slug(project)`."""

    def __init__(self, template: str):
        if PROJECT_PLACEHOLDER not in template:
            raise A44Error(E_SQL_UNSAFE_DATABASE,
                           f"{APP_DATABASE_ENV} names one database for every project; workflow SQL needs one per "
                           f"project", hint=f"put {PROJECT_PLACEHOLDER} in its user and database names, e.g. "
                           f"postgresql://app_{{project}}@db.internal/app_{{project}}, and create them per project "
                           "(docs/store.md \"Any other PostgreSQL as the application database\"); or unset it to use "
                           "the embedded server's")
        if PROJECT_PLACEHOLDER not in database_of(template):
            raise A44Error(E_SQL_UNSAFE_DATABASE,
                           f"{APP_DATABASE_ENV} must name a database per project: put {PROJECT_PLACEHOLDER} in the "
                           "database name", hint="e.g. postgresql://app_{project}@db.internal/app_{project}")
        self.template = template

    def database(self, project: str) -> str:
        return database_of(self.url_of(project))

    def url_of(self, project: str) -> str:
        return self.template.replace(PROJECT_PLACEHOLDER, project_slug(project))

    async def url(self, project: str) -> str:
        return self.url_of(project)


class AppDatabase:
    """The projects' application databases (`locator`: a ProjectLocator, a `{project}` URL template, or None: not
    configured), each behind the wall, with `wall` telling it the daemon's control role and database."""

    def __init__(self, locator: ProjectLocator | str | None, *, wall: Wall | None = None):
        self.locator = TemplateLocator(locator) if isinstance(locator, str) else locator
        self.wall = wall or Wall()
        self._pools = Pools()
        self._known: set[str] = set()       # projects seen: their databases are off limits to the others

    def know(self, projects) -> None:
        """Projects that exist (the daemon's start lists the published ones): no other project's role may connect
        to their databases."""
        self._known.update(projects)

    def _missing(self) -> A44Error:
        return A44Error(E_SQL_NO_DATABASE,
                        "this sql/execute step names no database (no dsnSecretRef, no declared connection) and no "
                        "application database is configured",
                        hint=f"set {APP_DATABASE_ENV} to a PostgreSQL URL with {PROJECT_PLACEHOLDER} (a database "
                             "per project, docs/store.md), or declare a connection with a dsnSecretRef; the control "
                             "store (A44_DATABASE_URL) is never used")

    async def pool(self, project: str):
        """The pool of `project`'s own database (made, with the database if the locator makes them, on first use)."""
        if self.locator is None:
            raise self._missing()
        self._known.add(project)
        url = await self.locator.url(project)

        async def init(conn):
            row = await guard(conn, self.wall)
            others = sorted({self.locator.database(p) for p in self._known if p != project}
                            - {row["database"]})
            iso = await _fetch_row(conn, "project_db_isolation", others=others,
                                   control_database=self.wall.control_database)
            reasons = isolation_reasons(row["role"], iso)
            if reasons:
                raise _refuse(row, reasons, "each project needs a login role of its own that owns no database, is "
                                            "a member of no role and may connect to its own database only "
                                            "(docs/store.md)")
            await _codecs(conn)

        return await self._pools.get(url, init=init, key=f"project:{project}", server_settings=PINNED)

    async def aclose(self) -> None:
        await self._pools.aclose()
