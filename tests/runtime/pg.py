"""PostgreSQL fixtures for every test directory (registered by tests/conftest.py).

One embedded server per test session (temp dir, random port, 127.0.0.1, fsync off), one template database
migrated once, and a fresh database per test cloned from it: the test kit's (anthares44/automation/testkit/
databases.py, its plugin's `a44_postgres` fixture), so these tests and the kit's share one server.
`A44_TEST_DATABASE_URL` (a URL to a maintenance database such as `postgres` on any PostgreSQL >= 15) uses that
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
import os

import asyncpg
import pytest

from anthares44.automation.clock import ManualClock
from anthares44.automation.runtime.store.core import Store
from anthares44.automation.testkit.databases import (  # noqa: F401 - helpers the tests import from here
    AppDatabases,
    database_name,
    with_database,
    with_login,
)
from anthares44.automation.testkit.databases import admin_statements as _admin  # noqa: F401 - as the tests name it


def query(url: str, sql: str, *args) -> list:
    """Rows of one statement on its own connection to `url`: what a test reads back from a database a daemon
    subprocess wrote to (outside any test event loop)."""
    async def run():
        # no statement cache: one statement per connection gains nothing from it, and through a PgBouncer in
        # transaction mode (A44_TEST_POSTGRES=pgbouncer) asyncpg's named statements of two short-lived connections
        # meet on one server connection (DuplicatePreparedStatementError, seen in .ci/real_postgres run)
        conn = await asyncpg.connect(url, statement_cache_size=0)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()

    return asyncio.run(run())


@pytest.fixture(scope="session")
def pg_admin_url(a44_postgres) -> str:
    """The test kit's server of this process (testkit/databases.py, the `a44_postgres` fixture of its plugin)."""
    return a44_postgres.admin_url


@pytest.fixture(scope="session")
def pg_template(a44_postgres) -> str:
    """Name of the migrated template database."""
    return a44_postgres.template


@pytest.fixture
def pg_url(a44_postgres) -> str:
    if a44_postgres.session_url is not None:    # A44_TEST_POSTGRES=pgbouncer: daemons this test starts bypass it
        os.environ["A44_DATABASE_SESSION_URL"] = a44_postgres.session_url
    url = a44_postgres.clone()
    yield url
    a44_postgres.drop(url)


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
def store(pg_url, clock, aio, tmp_path, a44_postgres) -> Store:
    s = aio(Store.connect(pg_url, clock=clock, results_dir=tmp_path / "results",
                          session_url=a44_postgres.session_url))
    aio(s.ensure_partitions())  # partitions for the ManualClock's months, as the daemon does at start
    yield s
    aio(s.close(timeout=30))   # bounded: a test that timed out may leave a connection waiting on a lock
