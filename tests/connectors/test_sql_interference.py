"""A failed statement touches only its own step (issue 24 items 2 and 7), on one project's pool of the application
database, in process: refused statements interleaved with valid ones never fail or slow the valid ones, the refused
one reports its own SQLSTATE, and a connection lost mid-statement is a retryable E_DB_UNAVAILABLE.

Before the fix, `sql_execute` called `reload_schema_state()` on any 42xxx error, which drops the statement cache of
every connection of the pool while other steps use it: valid INSERTs failed with `InternalClientError: cannot close
prepared statement; refs == 1 != 0`, and a terminated backend surfaced as a permanent `E_SQL` (InterfaceError from
`is_in_transaction()` on a connection already released to the pool). A PostgreSQL restart under a running statement
is the same lost connection: tested on a server of its own, so the restart cuts workflow SQL only (through a real
`serve`, where the control store is cut too, tests/runtime/test_project_sql.py item 7)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import asyncpg
import pytest

from anthares44.automation.errors import E_DB_UNAVAILABLE, E_SQL_FORBIDDEN, A44Error
from anthares44.automation.stdlib_connectors.sql_database import AppDatabase
from anthares44.automation.testkit.databases import start_server
from tests.connectors.support import run_step
from tests.runtime.pg import AppDatabases, query

ROUNDS = 10 if os.environ.get("A44_SLOW") == "1" else 3     # the proof is 10 rounds (A44_SLOW=1); CI runs 3
VALID = REFUSED = 60


@pytest.fixture
def app(app_url, aio):
    db = AppDatabase(app_url)
    yield db
    aio(db.aclose())


@pytest.mark.slow
def test_refused_statements_never_fail_valid_ones_beside_them(registry, make_ctx, app, aio):
    """60 valid INSERTs and 60 refused `pg_read_file` (42501) interleaved on one pool, ROUNDS times: every valid
    step succeeds at its first try, every refused one is E_SQL_FORBIDDEN with SQLSTATE 42501."""
    ctx = make_ctx(services={"app_db": app})
    aio(run_step(registry, "sql/execute", {"query": "create table ledger (run_id text, n int, primary key (run_id, n))"},
                 ctx))

    async def step(i: int, r: int):
        if i % 2:
            q = {"query": "select pg_read_file($1) as f", "params": ["/etc/hostname"]}
        else:
            q = {"query": "insert into ledger (run_id, n) values ($1, $2)", "params": [f"r{r}", i]}
        try:
            return i, await run_step(registry, "sql/execute", q, make_ctx(services={"app_db": app}))
        except A44Error as exc:
            return i, exc

    async def round_(r: int):
        return await asyncio.gather(*(step(i, r) for i in range(VALID + REFUSED)))

    failed_valid, wrong_refusals = [], []
    for r in range(ROUNDS):
        outcomes = aio(round_(r))
        for i, out in outcomes:
            if i % 2 == 0 and not (isinstance(out, dict) and out["rowCount"] == 1):
                failed_valid.append((r, i, out))
            if i % 2 and not (isinstance(out, A44Error) and out.code == E_SQL_FORBIDDEN
                              and out.details.get("sqlstate") == "42501"):
                wrong_refusals.append((r, i, out))
    assert failed_valid == [] and wrong_refusals == [], (failed_valid[:3], wrong_refusals[:3])
    n = aio(run_step(registry, "sql/execute", {"query": "select count(*)::int as n from ledger"}, ctx))
    assert n["rows"] == [{"n": ROUNDS * VALID}]


def test_a_backend_terminated_mid_statement_is_retryable_unavailable(registry, make_ctx, app, aio, pg_admin_url):
    """The step's backend is terminated (pg_terminate_backend by the server's admin, as a failover would cut it)
    while its statement runs: the attempt is E_DB_UNAVAILABLE (retryable), and the next attempt succeeds on a new
    connection of the same pool."""
    async def scenario():
        ctx = make_ctx(services={"app_db": app}, timeout_s=30)
        task = asyncio.create_task(run_step(registry, "sql/execute",
                                            {"query": "select pg_sleep(20), 'slow-step-marker' as m"}, ctx))
        pid = await _backend_of(pg_admin_url, "slow-step-marker")
        await asyncio.to_thread(query, pg_admin_url, "select pg_terminate_backend($1)", pid)
        with pytest.raises(A44Error) as exc:
            await task
        again = await run_step(registry, "sql/execute", {"query": "select 1 as one"},
                               make_ctx(services={"app_db": app}, attempt=2))
        return exc.value, again

    err, again = aio(scenario())
    assert err.code == E_DB_UNAVAILABLE and err.retryable, err
    assert again["rows"] == [{"one": 1}]


def test_a_postgresql_restart_under_a_running_statement_is_retryable_unavailable(registry, make_ctx, aio):
    """The server restarts (fast shutdown: every session cut, as a failover does) while the step's statement runs:
    the attempt is E_DB_UNAVAILABLE (retryable); so is an attempt while the server is down; once it is back the
    next attempt succeeds on the same project pool."""
    root = Path(tempfile.mkdtemp(prefix="a44-test-pg-restart-"))
    server = start_server(root)
    port = server.status().port
    admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    dbs = AppDatabases(admin)
    dbs.url("pj_default")
    app = AppDatabase(dbs.template)

    def step(query: str, attempt: int):
        return run_step(registry, "sql/execute", {"query": query},
                        make_ctx(services={"app_db": app}, attempt=attempt, timeout_s=30))

    async def scenario():
        assert (await step("select 1 as one", 1))["rows"] == [{"one": 1}]           # the pool is open
        task = asyncio.create_task(step("select pg_sleep(20), 'restart-marker' as m", 1))
        await _backend_of(admin, "restart-marker")
        await asyncio.to_thread(server.stop)
        errors = []
        with pytest.raises(A44Error) as cut:
            await task
        errors.append(cut.value)
        with pytest.raises(A44Error) as down:
            await step("select 2 as two", 2)
        errors.append(down.value)
        await asyncio.to_thread(server.start, port)
        return errors, await step("select 3 as three", 3)

    try:
        errors, again = aio(scenario())
    finally:
        aio(app.aclose())
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert [(e.code, e.retryable) for e in errors] == [(E_DB_UNAVAILABLE, True)] * 2, errors
    assert again["rows"] == [{"three": 3}]


async def _backend_of(admin_url: str, marker: str) -> int:
    """The backend pid of the statement whose text holds `marker`, once it runs."""
    for _ in range(200):
        rows = await asyncio.to_thread(query, admin_url, "select pid from pg_stat_activity where query like $1 "
                                       "and pid <> pg_backend_pid()", f"%{marker}%")
        if rows:
            return rows[0]["pid"]
        await asyncio.sleep(0.05)
    raise AssertionError(f"the statement {marker} never started")


def test_asyncpg_still_has_the_private_hooks_the_connector_uses():
    """sql_execute uses `Connection._prepare(use_cache=True)` and drops one connection's cache with
    `_drop_local_statement_cache()`; sql_session marks its `BEGIN` managed (`Transaction._managed`) and ends it
    itself (`Connection._top_xact`): a driver upgrade that removes them must fail here, not in production."""
    assert hasattr(asyncpg.connection.Connection, "_prepare")
    assert hasattr(asyncpg.connection.Connection, "_drop_local_statement_cache")
    assert "_top_xact" in asyncpg.connection.Connection.__slots__
    assert "_managed" in asyncpg.transaction.Transaction.__slots__
