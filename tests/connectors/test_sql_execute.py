"""sql/execute against a real PostgreSQL application database (the `app_url` fixture: a database per project with a
login role that has no server-level powers): the seed's effect guard, values in and out, row counts, caps, how
failures are classified, and the wall in front of every workflow database."""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg
import pytest

from anthares44.automation.errors import (
    E_DB_UNAVAILABLE,
    E_SQL,
    E_SQL_CONFLICT,
    E_SQL_NO_DATABASE,
    E_STEP_TIMEOUT,
    A44Error,
)
from anthares44.automation.runtime.render import make_scope, render_params
from anthares44.automation.stdlib_connectors.protocol import StepContext
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from anthares44.automation.stdlib_connectors.sql_database import AppDatabase, database_of
from tests.connectors.support import closed_port, run_step


@pytest.fixture
def db(app_url, make_ctx, aio):
    """ctx factory wired to the application database, as the engine wires it."""
    app = AppDatabase(app_url)

    def ctx(**kw):
        return make_ctx(services={"app_db": app}, **kw)

    yield ctx
    aio(app.aclose())


def sql(registry, aio, ctx, query, params=None, **extra):
    return aio(run_step(registry, "sql/execute", {"query": query, "params": params, **extra}, ctx))


def test_effect_guard_inserts_once_across_attempts(registry, db, aio):
    sql(registry, aio, db(), "create table payments (run_id text, step_id text, amount numeric, "
                              "primary key (run_id, step_id))")
    # the step as the compiler lowers it: params are templates over the run scope
    step = {"query": "insert into payments values ($1, $2, $3) on conflict (run_id, step_id) do nothing",
            "params": [{"$tpl": "{{ run.id }}"}, {"$tpl": "{{ run.step_id }}"}, {"$tpl": "{{ input.amount }}"}]}
    counts = []
    for attempt in (1, 2):
        ctx = db(run_id="run_A", step_id="mark-paid", attempt=attempt)
        scope = make_scope(input={"amount": "12.50"}, run={"id": ctx.run_id, "step_id": ctx.step_id,
                                                            "attempt": attempt})
        counts.append(aio(run_step(registry, "sql/execute", render_params(step, scope), ctx))["rowCount"])
    assert counts == [1, 0]
    rows = sql(registry, aio, db(), "select run_id, step_id, amount from payments")["rows"]
    assert rows == [{"run_id": "run_A", "step_id": "mark-paid", "amount": "12.50"}]


def test_row_count_of_update_and_delete_comes_from_the_status(registry, db, aio):
    sql(registry, aio, db(), "create table inv (id int primary key, status text)")
    assert sql(registry, aio, db(), "insert into inv select g, 'open' from generate_series(1, 5) g")["rowCount"] == 5
    out = sql(registry, aio, db(), "update inv set status = 'paid' where id <= $1", [3])
    assert out == {"rowCount": 3, "rows": [], "truncated": False}
    out = sql(registry, aio, db(), "delete from inv where status = $1 returning id", ["open"])
    assert out["rowCount"] == 2 and sorted(r["id"] for r in out["rows"]) == [4, 5]


def test_values_in_are_adapted_to_placeholder_types(registry, db, aio):
    sql(registry, aio, db(), "create table t (i int8, n numeric, j jsonb, ts timestamptz, d date, s text, "
                              "b bool, a int4[])")
    sql(registry, aio, db(), "insert into t values ($1, $2, $3, $4, $5, $6, $7, $8)",
        ["42", 0.1, {"k": [1, "x"]}, "2024-03-01T10:00:00Z", "2024-03-01", 7, "true", ["1", 2]])
    row = sql(registry, aio, db(), "select * from t")["rows"][0]
    assert row == {"i": 42, "n": "0.1", "j": {"k": [1, "x"]}, "ts": "2024-03-01T10:00:00+00:00",
                   "d": "2024-03-01", "s": "7", "b": True, "a": [1, 2]}


def test_values_out_are_json_safe(registry, db, aio):
    row = sql(registry, aio, db(), """
        select 1.50::numeric as dec, '2024-01-02 03:04:05+00'::timestamptz as ts, '\\x0102ff'::bytea as raw,
               'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid as id, interval '90 seconds' as dur,
               'NaN'::float8 as nan, '{"a": {"b": [1, 2]}}'::jsonb as doc, array[1.5, 2]::numeric[] as nums,
               null::text as nothing, '12:30'::time as t""")["rows"][0]
    assert row == {"dec": "1.50", "ts": "2024-01-02T03:04:05+00:00", "raw": "AQL/",
                   "id": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "dur": 90.0, "nan": "nan",
                   "doc": {"a": {"b": [1, 2]}}, "nums": ["1.5", "2"], "nothing": None, "t": "12:30:00"}
    json.dumps(row, allow_nan=False)


def test_rows_are_capped(registry, db, aio):
    out = sql(registry, aio, db(), "select g from generate_series(1, 10) g", maxRows=3)
    assert out == {"rowCount": 10, "rows": [{"g": 1}, {"g": 2}, {"g": 3}], "truncated": True}


def test_values_are_bound_never_spliced(registry, db, aio):
    sql(registry, aio, db(), "create table names (s text)")
    evil = "x'); drop table names; --"
    sql(registry, aio, db(), "insert into names values ($1)", [evil])
    assert sql(registry, aio, db(), "select s from names")["rows"] == [{"s": evil}]


def test_database_refusals_are_permanent_sql_errors(registry, db, aio):
    sql(registry, aio, db(), "create table u (id int primary key)")
    sql(registry, aio, db(), "insert into u values (1)")
    cases = [("selec 1", None, "42601"), ("insert into u values ($1)", [1], "23505"),
             ("select * from no_such_table", None, "42P01"), ("select $1::int", ["abc"], None),
             ("select $1::int, $2::int", [1], None)]
    for query, params, state in cases:
        with pytest.raises(A44Error) as exc:
            sql(registry, aio, db(), query, params)
        err = exc.value
        assert err.code == E_SQL and not err.retryable, (query, err)
        if state:
            assert err.details["sqlstate"] == state and state in err.message
    assert exc.value.message.startswith("the statement has 2 placeholder(s)")


def test_lock_not_available_is_retryable(registry, db, aio, app_dbs):
    sql(registry, aio, db(), "create table l (id int primary key)")
    sql(registry, aio, db(), "insert into l values (1)")

    async def hold_and_try():
        other = await asyncpg.connect(app_dbs.url())
        try:
            tx = other.transaction()
            await tx.start()
            await other.execute("select * from l for update")
            try:
                await run_step(registry, "sql/execute", {"query": "select * from l for update nowait"}, db())
            finally:
                await tx.rollback()
        finally:
            await other.close()

    with pytest.raises(A44Error) as exc:
        aio(hold_and_try())
    assert exc.value.code == E_SQL_CONFLICT and exc.value.retryable and exc.value.details["sqlstate"] == "55P03"


def test_slow_statement_is_step_timeout(registry, db, aio):
    with pytest.raises(A44Error) as exc:
        sql(registry, aio, db(timeout_s=0.3), "select pg_sleep(5)")
    assert exc.value.code == E_STEP_TIMEOUT and exc.value.retryable
    assert sql(registry, aio, db(), "select 1 as one")["rows"] == [{"one": 1}]  # the pool is still usable


def test_dsn_from_a_secret(registry, make_ctx, aio, app_dbs):
    reg = ConnectorRegistry({"con_reporting": {"id": "con_reporting", "type": "sql/execute",
                                               "dsnSecretRef": "sec_reporting"}})
    try:
        ctx = make_ctx(secrets={"sec_reporting": app_dbs.url("pj_reporting"), "sec_down": f"postgresql://a44:pw@127.0.0.1:{closed_port()}/x"})
        out = aio(run_step(reg, "con_reporting", {"query": "select $1::jsonb as doc", "params": [{"a": 1}]}, ctx))
        assert out["rows"] == [{"doc": {"a": 1}}]
        with pytest.raises(A44Error) as exc:
            aio(run_step(reg, "sql/execute", {"query": "select 1", "dsnSecretRef": "sec_down"}, ctx))
        assert exc.value.code == E_DB_UNAVAILABLE and exc.value.retryable
        assert "pw@" not in exc.value.message
    finally:
        aio(reg.aclose())


def test_no_application_database_is_a_clear_permanent_error_never_the_control_store(registry, make_ctx, aio,
                                                                                      store):
    # the control store in the services (as the engine passes it to the stdlib) is not a fallback
    with pytest.raises(A44Error) as exc:
        aio(run_step(registry, "sql/execute", {"query": "select 1"},
                     make_ctx(services={"store": store, "app_db": AppDatabase(None)})))
    assert exc.value.code == E_SQL_NO_DATABASE and not exc.value.retryable
    assert "A44_APP_DATABASE_URL" in exc.value.hint


def _commits_per_step(app_dbs, admin_url, aio) -> float:
    """Steady-state transactions (pg_stat_database.xact_commit) per sql/execute step on the application database:
    two sessions of 5 and 25 steps on one pooled connection; the difference removes the constant costs
    (connecting, the wall's check, type introspection, the first Parse, the reading connection's own)."""
    from tests.runtime.engine_support import xact_commits
    from tests.runtime.pg import with_database

    app_url = app_dbs.url()
    stats_url = with_database(admin_url, database_of(app_url))     # pg_stat_database is not the project's to read

    async def session(n: int) -> int:
        before = await xact_commits(stats_url)
        app = AppDatabase(app_dbs.template)
        reg = ConnectorRegistry()
        try:
            for i in range(n):
                ctx = StepContext(run_id=f"run_{i}", step_id="s", attempt=1, idempotency_key=f"run_{i}:s",
                                  project_id="pj_default", workflow_id="wf", deadline=time.monotonic() + 10,
                                  services={"app_db": app})
                out = await run_step(reg, "sql/execute", {
                    "query": "insert into guard (run_id, step_id, amount) values ($1, $2, $3) "
                             "on conflict (run_id, step_id) do nothing", "params": [ctx.run_id, "s", "1.5"]}, ctx)
                assert out["rowCount"] == 1
        finally:
            await reg.aclose()
            await app.aclose()            # a backend flushes its counters when it exits
        await asyncio.sleep(0.05)
        return await xact_commits(stats_url) - before

    async def setup():
        conn = await asyncpg.connect(app_url)
        await conn.execute("create table guard (run_id text, step_id text, amount numeric, "
                           "primary key (run_id, step_id))")
        await conn.close()

    aio(setup())
    small = aio(session(5))
    aio(_truncate(app_url))
    large = aio(session(25))
    return (large - small) / 20


async def _truncate(url):
    conn = await asyncpg.connect(url)
    await conn.execute("truncate guard")
    await conn.close()


def test_a_step_costs_one_commit(app_dbs, pg_admin_url, aio, capsys):
    """One transaction for the statement and the session reset (sql_session.py; asyncpg's statement cache: no
    Parse/Describe round trip after the first use on a connection). Before, the pool's reset on release was a
    second one; before the cache was used, `conn.prepare` cost a third one per step."""
    per_step = _commits_per_step(app_dbs, pg_admin_url, aio)
    with capsys.disabled():
        print(f"\nsql/execute: {per_step:.2f} commits per step")
    assert per_step <= 1.1


def test_a_cached_statement_invalidated_by_ddl_is_prepared_again(registry, db, aio):
    sql(registry, aio, db(), "create table c (id int)")
    sql(registry, aio, db(), "insert into c values ($1)", ["1"])
    assert sql(registry, aio, db(), "select * from c where id = $1", [1])["rows"] == [{"id": 1}]
    sql(registry, aio, db(), "alter table c add column note text default 'x'")     # result type changes
    assert sql(registry, aio, db(), "select * from c where id = $1", [1])["rows"] == [{"id": 1, "note": "x"}]
    sql(registry, aio, db(), "alter table c alter column id type text")             # parameter type changes
    assert sql(registry, aio, db(), "select * from c where id = $1", [1])["rows"] == [{"id": "1", "note": "x"}]
