"""The pytest plugin of the test kit (entry point `pytest11`: `pip install 'anthares44-automation[test]'` makes
every pytest session load it).

Fixtures:
  a44_postgres  session  the process's embedded PostgreSQL and its migrated template (databases.TestPostgres)
  a44_env       test     an `Env` (env.py) on a fresh clone of the template, with its own application database
                         for sql/execute, a VirtualClock, the connector mocks and the socket guard on

Mark a test `@pytest.mark.a44_env(start="2026-03-28T00:00:00Z", project="pj_x", lease="30s")` to set where its
clock starts and what its Env runs as.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .databases import AppDatabases, TestPostgres


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "a44_env(start=ISO, project=P, lease=D, seed=N): how the test's a44_env "
                                       "is made")


@pytest.fixture(scope="session")
def a44_postgres() -> Iterator[TestPostgres]:
    pg = TestPostgres.start()
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def a44_env(request: pytest.FixtureRequest, a44_postgres: TestPostgres, tmp_path):
    from .env import Env
    from .guard import socket_guard

    marker = request.node.get_closest_marker("a44_env")
    options = dict(marker.kwargs) if marker is not None else {}
    project = options.get("project", "pj_default")
    url = a44_postgres.clone()
    apps = AppDatabases(a44_postgres.admin_url)
    apps.url(project)
    try:
        with socket_guard(a44_postgres.ports):
            env = Env(url, app_database_url=apps.template, tmp=tmp_path, postgres=a44_postgres, **options)
            try:
                yield env
            finally:
                env.close()
    finally:
        apps.drop()
        a44_postgres.drop(url)
