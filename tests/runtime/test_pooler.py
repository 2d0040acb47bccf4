"""a44 behind PgBouncer in transaction pooling mode (runtime/store/pooler.py, docs/store.md "Behind a pooler"): a
real `pgbouncer` (Debian's package) on 127.0.0.1 in front of this session's test server. The probe tells a
transaction pooler from a session; a store on it runs without a statement cache (asyncpg's named statements break
there); migrations take no session lock; `serve` refuses to start without a session URL (its LISTEN would go
through the pooler) and, with one, runs and wakes on NOTIFY. Skipped, with the reason, without pgbouncer."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path

import asyncpg
import pytest

from anthares44.automation.clock import SystemClock
from anthares44.automation.errors import E_DB_POOLER, A44Error
from anthares44.automation.runtime.store import pooler
from anthares44.automation.runtime.store.core import Store
from anthares44.automation.testkit import servers
from anthares44.automation.testkit.databases import admin, database_name, with_database
from tests.runtime.daemon_support import ServeProcess, wait_until
from tests.runtime.engine_support import node, workflow
from tests.runtime.pg import query

try:
    servers.pgbouncer_binary()
    MISSING = None
except servers.Unavailable as exc:
    MISSING = str(exc)
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"{MISSING} (CI installs it when apt is available)")


@pytest.fixture(scope="module")
def bouncers(a44_postgres):
    """A transaction-mode and a session-mode pgbouncer in front of the test server."""
    root = Path(tempfile.mkdtemp(prefix="a44-test-pgb-"))
    user = a44_postgres._server.system_user if a44_postgres._server is not None else None
    made = []
    try:
        for mode in ("transaction", "session"):
            made.append(servers.Bouncer(root / mode, a44_postgres.port, user=user, pool_mode=mode).start())
        yield dict(zip(("transaction", "session"), made, strict=True))
    finally:
        for b in made:
            b.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pooled(bouncers, pg_url) -> str:
    """This test's database through the transaction pooler."""
    return bouncers["transaction"].url(database_name(pg_url))


def direct_of(a44_postgres) -> str:
    return f"postgresql://postgres@127.0.0.1:{a44_postgres.port}"   # no database: the store's own


def test_the_probe_tells_a_transaction_pooler_from_a_session(bouncers, pg_url, a44_postgres):
    pooler.forget()
    direct = a44_postgres.admin_url
    assert asyncio.run(pooler.probe(direct)) == pooler.DIRECT
    assert asyncio.run(pooler.probe(bouncers["transaction"].url())) == pooler.Pooling(proxied=True, transaction=True)
    assert asyncio.run(pooler.probe(bouncers["session"].url())) == pooler.Pooling(proxied=True, transaction=False)


def test_a_session_url_without_a_database_takes_the_stores():
    url = "postgresql://a44:pw@pgbouncer:6432/a44_control"
    assert pooler.session_url_of(url, "postgresql://a44:pw@db:5432") == "postgresql://a44:pw@db:5432/a44_control"
    assert pooler.session_url_of(url, "postgresql://a44@db/other") == "postgresql://a44@db/other"
    assert pooler.session_url_of(url, None) is None


def test_a_store_through_the_pooler_runs_concurrent_statements_without_named_prepared_statements(pooled, clock):
    """asyncpg's statement cache names each statement on the backend it prepared it on; through a transaction
    pooler the next use meets another backend ("prepared statement __asyncpg_stmt_N__ does not exist")."""
    async def go():
        store = await Store.connect(pooled, clock=clock, max_size=6)
        try:
            assert store.pooling.transaction

            async def work(i: int):
                for _ in range(10):
                    assert await store.fetchval("migration_is_applied", number=1)
                    assert await store.fetchval("server_version") > 0
                    async with store.transaction("t") as tx:
                        await tx.fetchval("pooler_backend_pid")
            await asyncio.gather(*(work(i) for i in range(12)))
        finally:
            await store.close()
    asyncio.run(go())


def test_migrate_through_the_pooler_leaves_no_advisory_lock_behind(bouncers, a44_postgres, clock):
    """From an empty database, so that every migration and its lock really go through the pooler (a clone of the
    migrated template applies none and takes no lock at all). A session lock would not show here with one client:
    the pool's reset (pg_advisory_unlock_all) lands on the same server backend; test_the_migration_runner_takes_no_
    session_lock below is what refuses one."""
    name = f"a44_empty_{secrets.token_hex(4)}"
    admin(a44_postgres.admin_url, f"create database {name}")
    url = bouncers["transaction"].url(name)

    async def go():
        for _ in range(2):   # a second daemon start would wait forever on a session lock left on a backend
            store = await Store.connect(url, clock=clock)
            try:
                report = await asyncio.wait_for(store.migrate(), 60)
            finally:
                await store.close()
        return report
    try:
        asyncio.run(go())
        applied = query(with_database(a44_postgres.admin_url, name), "select count(*) from automation.schema_migrations")
        assert applied[0][0] > 40
        locks = query(a44_postgres.admin_url, "select count(*) from pg_locks where locktype = 'advisory' and "
                                              "database = (select oid from pg_database where datname = $1)", name)
        assert locks[0][0] == 0
    finally:
        admin(a44_postgres.admin_url, f"drop database if exists {name} with (force)")


def test_session_work_through_the_pooler_without_a_session_url_is_refused(pooled, clock):
    async def go():
        store = await Store.connect(pooled, clock=clock)
        try:
            with pytest.raises(A44Error) as err:
                async with store.session_connection("listen"):
                    pass
            assert err.value.code == E_DB_POOLER
            with pytest.raises(A44Error) as err:
                await store.check_session()
            assert err.value.code == E_DB_POOLER and "A44_DATABASE_SESSION_URL" in (err.value.hint or "")
        finally:
            await store.close()
    asyncio.run(go())


def _serve_env(extra: dict[str, str | None]):
    saved = {k: os.environ.get(k) for k in extra}
    for k, v in extra.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    return saved


def test_serve_refuses_to_start_when_its_listen_would_go_through_the_pooler(pooled, tmp_path):
    saved = _serve_env({"A44_DATABASE_SESSION_URL": None})
    try:
        daemon = ServeProcess(pooled, tmp_path, worker_id="pooled")
    finally:
        _serve_env(saved)
    try:
        code = daemon.proc.wait(60)
        out = daemon.output()
    finally:
        daemon.stop()
    assert code != 0, out
    assert E_DB_POOLER in out and "A44_DATABASE_SESSION_URL" in out, out


def test_serve_behind_the_pooler_with_a_session_url_warns_and_wakes_on_notify(pooled, a44_postgres, tmp_path):
    ir = workflow([node("a", uses="pass", params={"output": 1}), node("b", uses="pass", params={"output": 2})],
                  name="pooled")

    async def publish():
        store = await Store.connect(pooled, clock=SystemClock(), session_url=direct_of(a44_postgres))
        try:
            from anthares44.automation.compiler.ir import to_json
            await store.ensure_partitions()
            await store.publish_version("pj_default", ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        finally:
            await store.close()

    async def create() -> str:
        store = await Store.connect(pooled, clock=SystemClock())
        try:
            return (await store.create_run("pj_default", ir.workflow_id, {}, "late")).run_id
        finally:
            await store.close()

    asyncio.run(publish())
    saved = _serve_env({"A44_DATABASE_SESSION_URL": direct_of(a44_postgres)})
    try:
        # lease 600 s: the idle daemon's missed-NOTIFY re-check comes only after it, so finishing proves the wake-up
        daemon = ServeProcess(pooled, tmp_path, worker_id="bounced", lease="600s")
    finally:
        _serve_env(saved)
    try:
        wait_until(lambda: "serving worker=" in daemon.output() or daemon.proc.poll() is not None, 60, "serving")
        assert daemon.proc.poll() is None, daemon.output()
        assert "transaction pooler" in daemon.output()      # the degraded mode is said
        time.sleep(0.5)
        run_id = asyncio.run(create())
        wait_until(lambda: query(pooled_direct(pooled, a44_postgres), "select state from automation.runs "
                                 "where run_id = $1", run_id)[0][0] == "succeeded", 120, "the run, woken by NOTIFY")
        assert daemon.term() == 0
    finally:
        daemon.stop()


def pooled_direct(pooled: str, a44_postgres) -> str:
    return f"{direct_of(a44_postgres)}/{database_name(pooled)}"


def test_asyncpg_with_its_statement_cache_breaks_through_the_pooler(pooled):
    """The reason for the above: what a44 would meet with asyncpg's defaults (documents PgBouncer's behaviour;
    if a PgBouncer >= 1.21 with max_prepared_statements ever answers, this says so)."""
    async def go():
        a = await asyncpg.connect(pooled)
        b = await asyncpg.connect(pooled)
        try:
            await a.fetchval("select $1::int", 1)
            async with b.transaction():
                await b.fetchval("select 2")          # takes the backend `a` prepared its statement on
                with pytest.raises(asyncpg.exceptions.InvalidSQLStatementNameError):
                    await a.fetchval("select $1::int", 1)
        finally:
            await a.close()
            await b.close()
    asyncio.run(go())


def test_a44_sessions_run_without_jit_where_they_may_say_so(pg_url, pooled, clock):
    """Directly, a44's sessions start with jit=off (Debian's LLVM-built server made the runtime ~20x slower with
    it); through the pooler they send no such startup parameter (PgBouncer refuses unknown ones)."""
    async def go():
        direct = await Store.connect(pg_url, clock=clock)
        bounced = await Store.connect(pooled, clock=clock)
        try:
            assert await direct.fetchval("pooler_jit_on") is False
            assert "jit" not in bounced.pooling.server_settings
            assert await bounced.fetchval("server_version") > 0     # the pooler let the session in
        finally:
            await direct.close()
            await bounced.close()
    asyncio.run(go())


def test_the_migration_runner_takes_no_session_lock():
    """Every statement migrate.py runs leaves no session state (core._session_neutral): a session advisory lock
    would stay behind on whichever backend the pooler gave that statement (asyncpg's reset on release masks it
    when the pool is idle, so the behaviour test above cannot see it every time)."""
    import re

    from anthares44.automation.runtime.store import migrate
    from anthares44.automation.runtime.store.core import _session_neutral

    names = set(re.findall(r'conn\.(?:execute|fetch|fetchval|fetchrow)\("(\w+)"', Path(migrate.__file__).read_text()))
    assert {"migration_lock", "migration_bootstrap", "migration_record"} <= names
    assert [n for n in sorted(names) if not _session_neutral(n)] == []
