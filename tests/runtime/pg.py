"""PostgreSQL fixtures for every test directory (registered by tests/conftest.py).

One embedded server per test session (temp dir, random port, 127.0.0.1, fsync off), one template database
migrated once, and a fresh database per test cloned from it (`CREATE DATABASE ... TEMPLATE`, ~50 ms).
`A44_TEST_DATABASE_URL` (a URL to a maintenance database such as `postgres` on any PostgreSQL >= 14) uses that
server instead; the test databases are created and dropped there.

Helper: query(url, sql, *args) -> rows, on a connection of its own.

Fixtures:
  pg_admin_url  session  URL of the maintenance database
  pg_url        test     URL of this test's own migrated database (the control store)
  app_dbs       test     the application databases of this test, one per project (AppDatabases: `url(project)`
                         makes the project's role and database as the embedded server's are made, and returns its
                         URL), dropped at the end
  app_url       test     their `{project}` template (what A44_APP_DATABASE_URL takes), `pj_default`'s made
  clock         test     a ManualClock (tests move it instead of sleeping)
  aio           test     aio(coro) runs a coroutine on this test's event loop (no pytest-asyncio needed)
  store         test     a connected Store on pg_url, the clock and tmp_path/results
"""

from __future__ import annotations

import asyncio
import atexit
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from anthares44.automation.clock import ManualClock
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.postgres.embedded import EmbeddedServer, free_port
from anthares44.automation.runtime.store.core import Store


def query(url: str, sql: str, *args) -> list:
    """Rows of one statement on its own connection to `url`: what a test reads back from a database a daemon
    subprocess wrote to (outside any test event loop)."""
    async def run():
        conn = await asyncpg.connect(url)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()

    return asyncio.run(run())


def database_name(url: str) -> str:
    """The database (and, for AppDatabases' URLs, the role) a URL names."""
    return urlsplit(url).path.lstrip("/")


def with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + database))


async def _admin(url: str, *statements: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        for stmt in statements:
            await conn.execute(stmt)
    finally:
        await conn.close()


def _start_server(root: Path) -> EmbeddedServer:
    server = EmbeddedServer(root, durable=False)
    server.initdb()
    for _ in range(5):  # another process may take the free port between our probe and the bind
        try:
            server.start(free_port(), wait_s=15)
            return server
        except A44Error:
            if server.status() is not None:
                raise
    raise RuntimeError("could not start the test PostgreSQL")


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    external = os.environ.get("A44_TEST_DATABASE_URL")
    if external:
        yield external
        return
    # Not under pytest's basetemp: that dir is 0700 (the server may run as another user than root) and
    # concurrent pytest sessions prune old basetemps, which would delete a running cluster.
    root = Path(tempfile.mkdtemp(prefix="a44-test-pg-"))
    server = _start_server(root)
    atexit.register(server.stop)  # in case the session dies before the finalizer (it is idempotent)
    try:
        yield f"postgresql://postgres@127.0.0.1:{server.status().port}/postgres"
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_template(pg_admin_url) -> str:
    """Name of the migrated template database."""
    name = f"a44_tmpl_{secrets.token_hex(4)}"
    asyncio.run(_admin(pg_admin_url, f"create database {name}"))

    async def migrate():
        # migrated at the ManualClock's start, so tests on the default clock find their partitions made
        store = await Store.connect(with_database(pg_admin_url, name), min_size=1, max_size=1, clock=ManualClock())
        try:
            await store.migrate()
        finally:
            await store.close()

    asyncio.run(migrate())
    yield name
    asyncio.run(_admin(pg_admin_url, f"drop database if exists {name} with (force)"))


@pytest.fixture
def pg_url(pg_admin_url, pg_template) -> str:
    name = f"a44_test_{secrets.token_hex(6)}"
    # as a control database must be: no workflow role may connect to it (the wall checks it)
    asyncio.run(_admin(pg_admin_url, f"create database {name} template {pg_template}",
                       f"revoke connect, temporary on database {name} from public"))
    yield with_database(pg_admin_url, name)
    asyncio.run(_admin(pg_admin_url, f"drop database if exists {name} with (force)"))


def with_login(url: str, role: str, password: str, database: str) -> str:
    parts = urlsplit(url)
    netloc = f"{role}:{password}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc, path="/" + database))


class AppDatabases:
    """The application databases of one test: for each project a login role and a database `<prefix><slug>`, made
    by a44's own provisioning (runtime/postgres/projects.py), all with one password, so that `template` (with
    `{project}`) reaches each."""

    def __init__(self, admin_url: str):
        self.admin_url = admin_url
        self.prefix = f"t{secrets.token_hex(4)}_"
        self.password = secrets.token_hex(16)
        self.template = with_login(admin_url, self.prefix + "{project}", self.password, self.prefix + "{project}")
        self._made: set[str] = set()

    def url(self, project: str = "pj_default") -> str:
        """The project's URL, its role and database made first."""
        from anthares44.automation.runtime.postgres.projects import provision
        from anthares44.automation.stdlib_connectors.sql_database import project_slug

        name = self.prefix + project_slug(project)
        if name not in self._made:
            asyncio.run(provision(self.admin_url, name, name, self.password))
            self._made.add(name)
        return self.template.replace("{project}", project_slug(project))

    def drop(self) -> None:
        statements = []
        for name in sorted(self._made):
            statements += [f'drop database if exists "{name}" with (force)', f'drop role if exists "{name}"']
        if statements:
            asyncio.run(_admin(self.admin_url, *statements))


@pytest.fixture
def app_dbs(pg_admin_url) -> AppDatabases:
    dbs = AppDatabases(pg_admin_url)
    yield dbs
    dbs.drop()


@pytest.fixture
def app_url(app_dbs) -> str:
    app_dbs.url("pj_default")
    return app_dbs.template


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def aio():
    loop = asyncio.new_event_loop()

    def run(coro):
        return loop.run_until_complete(coro)

    yield run
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


@pytest.fixture
def store(pg_url, clock, aio, tmp_path) -> Store:
    s = aio(Store.connect(pg_url, clock=clock, results_dir=tmp_path / "results"))
    aio(s.ensure_partitions())  # partitions for the ManualClock's months, as the daemon does at start
    yield s
    aio(s.close(timeout=30))   # bounded: a test that timed out may leave a connection waiting on a lock
