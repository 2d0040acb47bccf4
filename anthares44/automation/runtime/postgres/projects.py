"""A role and a database per project for workflow SQL, on a server where a44 may set them up: the embedded one.

Project `P` gets the login role and the database `a44_app_<slug>` (`slug`: sql_database.project_slug, the id itself
for plain ids such as `pj_default`). Why a database and not a schema per project: catalogs are per database, so a
project cannot even list another's table names; CONNECT is the wall (granted to the project's role on its own
database only, taken from PUBLIC on every other database a44 made); `pg_stat_activity` and the other session lists
are revoked from PUBLIC inside each project database, so no project sees another's sessions; and dropping a project
is dropping its database.

What a44 makes, as the server's superuser (setup only; the statements are `project_*` in
runtime/store/queries/workflow_sql.sql):
  * the role: LOGIN, no superuser, CREATEDB, CREATEROLE, replication or RLS bypass, a member of no role and with no
    member, no settings of its own (`ALTER ROLE ... SET`, in any database), its password derived from the server's
    `app_secret` (HMAC-SHA256, so every daemon of the server computes the same one and nothing stores it per project);
  * the database: owned by the superuser (so the project cannot change its settings, connection limit or grants),
    no settings, no connection limit, CONNECT and TEMPORARY for the project's role only;
  * inside it: the role owns the schema `public` (its tables) and nothing else.
A role can still change its own password and its own settings: `restore()` undoes both, and everything above, at
every daemon start for every project that has published a workflow, and `url()` does it on a project's first use in
this process (a project published while the daemon runs). The connections pin the settings sql/execute relies on
(sql_database.PINNED), so a role's own settings never take effect on a44's sessions even before that.

`EmbeddedProjects` is the sql_database.ProjectLocator of the embedded server (database.LocalDatabase.projects()).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
from collections.abc import Iterable

from ...errors import E_DB_UNAVAILABLE, A44Error
from ...redact import redact_url
from ...stdlib_connectors.sql_database import project_slug
from .roles import login_url, with_database

PREFIX = "a44_app_"
log = logging.getLogger("a44.projects")


def project_name(project: str, prefix: str = PREFIX) -> str:
    """The name of the project's role and database."""
    return prefix + project_slug(project)


def derive_password(secret: str, role: str) -> str:
    """The role's password: HMAC-SHA256 of its name under the server's `app_secret`, base64url."""
    mac = hmac.new(secret.encode(), b"a44 project role\x00" + role.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


async def provision(admin_url: str, role: str, database: str, password: str) -> None:
    """Make or restore one project's role and database (see the module docstring), as `admin_url`'s superuser;
    idempotent, and serialised across processes by an advisory lock on the admin database."""
    import asyncpg

    from ..store.session import Session

    raw = await asyncpg.connect(admin_url)
    conn = Session(raw)
    try:
        await conn.execute("project_sql_lock")
        try:
            async with conn.transaction():
                await conn.execute("project_args_set", role=role, password=password, database=database)
                await conn.execute("project_role_restore")
            if not await conn.fetchval("project_database_exists", database=database):
                await raw.execute(await conn.fetchval("project_database_create_sql", database=database))
            async with conn.transaction():
                await conn.execute("project_args_set", role=role, password=password, database=database)
                await conn.execute("project_database_restore")
        finally:
            await conn.execute("project_sql_unlock")
    finally:
        await raw.close()
    inner = await asyncpg.connect(with_database(admin_url, database))
    try:
        session = Session(inner)
        async with session.transaction():
            await session.execute("project_args_set", role=role, password=password, database=database)
            await session.execute("project_schema_restore")
    finally:
        await inner.close()


class EmbeddedProjects:
    """sql_database.ProjectLocator of a server a44 sets up: `admin_url` is the superuser's URL (of any database),
    `secret` the server's app_secret, `host`/`port` where the project roles log in."""

    def __init__(self, admin_url: str, secret: str, *, host: str, port: int, prefix: str = PREFIX):
        self.admin_url, self._secret, self.host, self.port, self.prefix = admin_url, secret, host, port, prefix
        self._ready: set[str] = set()           # restored by this process
        self._locks: dict[str, asyncio.Lock] = {}

    def database(self, project: str) -> str:
        return project_name(project, self.prefix)

    def url_of(self, project: str) -> str:
        name = project_name(project, self.prefix)
        return login_url(self.port, name, derive_password(self._secret, name), name, host=self.host)

    async def url(self, project: str) -> str:
        if project not in self._ready:
            async with self._locks.setdefault(project, asyncio.Lock()):
                if project not in self._ready:
                    await self._provision(project)
        return self.url_of(project)

    async def restore(self, projects: Iterable[str]) -> list[tuple[str, A44Error]]:
        """Make or restore every project's role and database; (project, error) for those that failed (each is
        logged; the others are restored all the same)."""
        failed = []
        for project in projects:
            try:
                await self._provision(project)
            except A44Error as exc:
                log.warning("workflow SQL of project %s: %s", project, exc)
                failed.append((project, exc))
        return failed

    async def _provision(self, project: str) -> None:
        import asyncpg

        name = project_name(project, self.prefix)
        try:
            await provision(self.admin_url, name, name, derive_password(self._secret, name))
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise A44Error(E_DB_UNAVAILABLE,
                           f"could not set up the database of project {project} ({name}) at "
                           f"{redact_url(self.admin_url)}: {type(exc).__name__}: {exc}",
                           hint="`a44 automation db status`; the next daemon start tries again") from exc
        self._ready.add(project)
