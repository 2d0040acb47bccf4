"""Driver errors never escape the store: they become A44Error with a code a user can act on."""

import shutil
import tempfile
from pathlib import Path

import asyncpg
import pytest

from anthares44.automation.errors import E_DB, E_DB_SCHEMA, E_DB_UNAVAILABLE, A44Error
from anthares44.automation.runtime.postgres.embedded import EmbeddedServer, free_port
from anthares44.automation.runtime.store.core import Store
from tests.runtime.pg import with_database


def test_unreachable_url_is_db_unavailable(aio):
    url = f"postgresql://a44:secret@127.0.0.1:{free_port()}/a44"
    with pytest.raises(A44Error) as exc:
        aio(Store.connect(url, connect_timeout=3))
    assert exc.value.code == E_DB_UNAVAILABLE and exc.value.retryable
    assert "secret" not in str(exc.value) and "***" in exc.value.message


def test_unknown_host_and_database_are_db_unavailable(aio, pg_admin_url):
    for url in ("postgresql://a44@no-such-host.invalid:5432/a44", with_database(pg_admin_url, "a44_no_such_db")):
        with pytest.raises(A44Error) as exc:
            aio(Store.connect(url, connect_timeout=3))
        assert exc.value.code == E_DB_UNAVAILABLE, url


def test_unmigrated_database_is_db_schema(aio, pg_admin_url):
    store = aio(Store.connect(pg_admin_url))  # the maintenance database has no automation schema
    try:
        with pytest.raises(A44Error) as exc:
            aio(store.list_runs("pj_default"))
        assert exc.value.code == E_DB_SCHEMA and "migrate" in exc.value.hint
    finally:
        aio(store.close())


def test_constraint_violation_is_db_with_sqlstate(store, aio):
    with pytest.raises(A44Error) as exc:
        aio(store.publish_version("pj_default", "wf_x", 0, "a" * 64, {}))  # version must be > 0
    assert exc.value.code == E_DB and exc.value.details["sqlstate"] == "23514"
    assert not isinstance(exc.value, asyncpg.PostgresError)


def test_server_stopped_under_a_connected_store_is_db_unavailable(aio, tmp_path):
    # a server of its own: stopping the session's server would break the other tests
    root = Path(tempfile.mkdtemp(prefix="a44-test-pg-stop-"))
    server = EmbeddedServer(root, durable=False)
    try:
        server.initdb()
        port = server.start(free_port()).port
        store = aio(Store.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", results_dir=tmp_path))
        try:
            aio(store.migrate())
            server.stop()
            with pytest.raises(A44Error) as exc:
                aio(store.list_runs("pj_default"))
            assert exc.value.code == E_DB_UNAVAILABLE
        finally:
            aio(store.close())
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
