"""Driver errors never escape the store: they become A44Error with a code a user can act on."""

import asyncpg
import pytest

from anthares44.automation.errors import E_DB, E_DB_SCHEMA, E_DB_UNAVAILABLE, A44Error
from anthares44.automation.runtime.embedded import free_port
from anthares44.automation.runtime.store import Store
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


def test_server_gone_mid_session_is_db_unavailable(store, aio, pg_url, pg_admin_url):
    async def body():
        admin = await asyncpg.connect(pg_admin_url)
        try:
            await admin.execute("select pg_terminate_backend(pid) from pg_stat_activity "
                                "where datname = $1 and pid <> pg_backend_pid()", pg_url.rsplit("/", 1)[1])
        finally:
            await admin.close()
        await store.list_runs("pj_default")

    with pytest.raises(A44Error) as exc:
        aio(body())
    assert exc.value.code == E_DB_UNAVAILABLE
