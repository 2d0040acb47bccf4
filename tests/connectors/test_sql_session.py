"""Nothing a workflow statement does to its session reaches the next step on the same pooled connection (issue 32
item 1, stdlib_connectors/sql_session.py): each hostile statement runs as a step, then a probe step runs on the
same backend (asserted by pid) of the project's pool and must see a fresh session. Also: the statements that cannot
run in a transaction block, or end it themselves, still work, and a step costs one commit (test_sql_execute.py)."""

from __future__ import annotations

import pytest

from anthares44.automation.errors import E_SQL, E_STEP_TIMEOUT, A44Error
from anthares44.automation.stdlib_connectors.sql_database import AppDatabase
from tests.connectors.support import run_step


@pytest.fixture
def step(app_url, make_ctx, registry, aio):
    """step(query, params=None, timeout_s=10) -> the step's result, on one AppDatabase (one pool) per test."""
    app, other = AppDatabase(app_url), AppDatabase(app_url)

    def run(query, params=None, timeout_s=10.0, db=app):
        return aio(run_step(registry, "sql/execute", {"query": query, "params": params},
                            make_ctx(services={"app_db": db}, timeout_s=timeout_s)))

    run.other = lambda query: run(query, db=other)      # a session of its own (another pool)
    yield run
    aio(app.aclose())
    aio(other.aclose())


def _pid(step) -> int:
    return step("select pg_backend_pid() as pid")["rows"][0]["pid"]


PROBE = ("select current_setting('role') as role, current_user::text as usr, current_setting('search_path') as sp, "
         "coalesce(nullif(current_setting('a44test.mark', true), ''), 'unset') as mark, current_setting('default_transaction_read_only') as ro, "
         "(select count(*)::int from pg_catalog.pg_class where relpersistence = 't') "
         "+ (select count(*)::int from pg_catalog.pg_proc where pronamespace = pg_catalog.pg_my_temp_schema()) as temps, "
         "(select count(*)::int from pg_catalog.pg_listening_channels()) as listens, "
         "(select count(*)::int from pg_catalog.pg_prepared_statements where from_sql) as prepared, "
         "(select count(*)::int from pg_catalog.pg_cursors where is_holdable) as cursors")
LOCK = 4242         # the advisory lock the hostile statements take; the probe takes it from another session


def _fresh(step) -> dict:
    row = step(PROBE)["rows"][0]
    lock = step.other(f"select pg_try_advisory_lock({LOCK}) as got")["rows"][0]["got"]
    return {k: v for k, v in row.items() if k != "usr"} | {"role_is_login": row["usr"] is not None,
                                                           "lock_free": lock}


FRESH = {"role": "none", "sp": "public", "mark": "unset", "ro": "off", "temps": 0, "listens": 0, "prepared": 0,
         "cursors": 0, "role_is_login": True,
         "lock_free": True}

HOSTILE = {
    "set role": "select set_config('role', current_user, false)",
    "search_path": "set search_path = nowhere",
    "custom setting": "select set_config('a44test.mark', 'leaked', false)",
    "read only session": "set session characteristics as transaction read only",
    "temp table": "create temp table leak_t (x int)",
    "temp function": "create function pg_temp.leak_f() returns int language sql as 'select 1'",
    "listen": "listen leak_channel",
    "prepare": "prepare leak_p as select 1",
    "prepare from a function": "do $$ begin execute 'prepare leak_q as select 2'; end $$",
    "cursor with hold": "declare leak_c cursor with hold for select 1",
    "advisory lock": "select pg_advisory_lock(4242)",
    "commit": "commit",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_statement_leaves_nothing_for_the_next_step(step, name):
    pid = _pid(step)
    step(HOSTILE[name])
    assert _pid(step) == pid          # the probe runs on the very session the statement had
    assert _fresh(step) == FRESH


def test_a_failed_statement_leaves_nothing_either(step):
    """Session advisory locks and PREPARE survive a rollback: the failure path resets too."""
    pid = _pid(step)
    step("create function leak_then_fail() returns int language plpgsql as $$ begin "
         "perform set_config('a44test.mark', 'leaked', false); perform pg_advisory_lock(4242); "
         "execute 'prepare leak_r as select 3'; return 1 / 0; end $$")
    with pytest.raises(A44Error) as exc:
        step("select leak_then_fail()")
    assert exc.value.code == E_SQL and exc.value.details["sqlstate"] == "22012"
    assert _pid(step) == pid
    assert _fresh(step) == FRESH


def test_a_step_cut_off_by_its_timeout_leaves_nothing(step):
    pid = _pid(step)
    with pytest.raises(A44Error) as exc:
        step("select set_config('a44test.mark', 'leaked', false), pg_advisory_lock(4242), pg_sleep(5)", timeout_s=0.3)
    assert exc.value.code == E_STEP_TIMEOUT
    assert _pid(step) == pid
    assert _fresh(step) == FRESH


def test_the_reset_cannot_be_hijacked_by_objects_of_the_statement(step):
    """A function named like the reset's, first on a search_path the statement set, and a temp view named like
    the catalog the reset reads: the reset still releases the lock and deallocates."""
    step("create function public.pg_advisory_unlock_all() returns void language sql as 'select null'")
    step("create view public.pg_prepared_statements as select ''::text as name, false as from_sql")
    step("select set_config('search_path', 'public, pg_catalog', false), pg_advisory_lock(4242)")
    step("prepare leak_s as select 4")
    assert _fresh(step) == FRESH


def test_sequence_state_does_not_leak(step):
    step("create sequence leak_seq")
    step("select nextval('leak_seq')")
    with pytest.raises(A44Error) as exc:
        step("select currval('leak_seq')")
    assert exc.value.details["sqlstate"] == "55000"      # currval is not yet defined in this session


def test_statements_that_cannot_run_in_a_transaction_block_still_run(step):
    step("create table big (id int)")
    step("insert into big select generate_series(1, 100)")
    assert step("vacuum big")["rowCount"] == 0
    step("create index concurrently big_id on big (id)")
    assert step("select count(*)::int as n from pg_indexes where indexname = 'big_id'")["rows"] == [{"n": 1}]
    step("discard all")                                  # drops asyncpg's cached statements too
    assert step("select count(*)::int as n from big where id > $1", [50])["rows"] == [{"n": 50}]
    assert _fresh(step) == FRESH


def test_a_statement_ending_the_transaction_itself_still_commits_and_resets(step):
    step("create table t (x int)")
    step("begin")                 # a warning only: the step's own block goes on and commits
    step("insert into t values (1)")
    step("rollback")
    step("insert into t values (2)")
    assert step("select array_agg(x order by x) as xs from t")["rows"] == [{"xs": [1, 2]}]
    assert _fresh(step) == FRESH


def test_a_deferred_constraint_failing_at_commit_is_the_statements_error(step):
    step("create table parent (id int primary key)")
    step("create table child (pid int references parent deferrable initially deferred)")
    with pytest.raises(A44Error) as exc:
        step("insert into child values (1)")
    assert exc.value.code == E_SQL and exc.value.details["sqlstate"] == "23503"
    assert step("select count(*)::int as n from child")["rows"] == [{"n": 0}]
    assert _fresh(step) == FRESH
