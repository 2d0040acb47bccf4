"""The wall in front of every workflow database (sql_database.py), in process against the test server: what a
step's DSN or a project's application database may not be, each refused with E_SQL_UNSAFE_DATABASE before its first
statement. Issue 24 item 4: the daemon's control role on another database (`postgres`) passed the wall, and with it
a step read the daemon's statements and terminated its sessions."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from anthares44.automation.errors import E_SQL_UNSAFE_DATABASE, A44Error
from anthares44.automation.stdlib_connectors.sql_database import AppDatabase, Wall
from tests.connectors.support import run_step
from tests.runtime.pg import _admin, with_database, with_login


@pytest.fixture
def roles(pg_admin_url):
    """roles(name, *grants) -> URL of a new login role on database `postgres` (dropped at the end)."""
    made = []

    def make(kind: str, *statements: str) -> tuple[str, str]:
        name, password = f"{kind}_{secrets.token_hex(4)}", secrets.token_hex(12)
        asyncio.run(_admin(pg_admin_url, f"create role {name} login password '{password}'",
                           *(s.format(role=name) for s in statements)))
        made.append(name)
        return name, with_login(pg_admin_url, name, password, "postgres")

    yield make
    asyncio.run(_admin(pg_admin_url, *(f"drop role if exists {r}" for r in reversed(made))))


def refused(registry, aio, ctx, params) -> A44Error:
    with pytest.raises(A44Error) as exc:
        aio(run_step(registry, "sql/execute", params, ctx))
    assert exc.value.code == E_SQL_UNSAFE_DATABASE and not exc.value.retryable, exc.value
    return exc.value


def test_the_control_role_is_refused_on_any_database_by_name_and_by_membership(registry, make_ctx, aio, roles):
    """A DSN secret naming the daemon's control role, on database `postgres` (no `automation` schema there), and
    one naming a role that is a member of it, are refused; so is any role that can see other sessions' statements
    or signal them."""
    control, control_on_postgres = roles("ctl")
    _, member = roles("member", f"grant {control} to {{role}}")
    _, stats = roles("stats", "grant pg_read_all_stats to {role}")
    _, monitor = roles("monitor", "grant pg_monitor to {role}")
    _, signal = roles("signal", "grant pg_signal_backend to {role}")
    _, plain = roles("plain")
    app = AppDatabase(None, wall=Wall(control_role=control))
    ctx = make_ctx(services={"app_db": app}, secrets={"control": control_on_postgres, "member": member,
                                                       "stats": stats, "monitor": monitor, "signal": signal,
                                                       "plain": plain})
    try:
        for ref, words in (("control", "is the daemon's control role"),
                           ("member", "is a member of the daemon's control role"),
                           ("stats", "pg_read_all_stats"), ("monitor", "pg_monitor"), ("signal", "pg_signal_backend")):
            err = refused(registry, aio, ctx, {"query": "select 1", "dsnSecretRef": ref})
            assert words in err.message, (ref, err)
        # the same server and database, a role with none of that: runs
        out = aio(run_step(registry, "sql/execute", {"query": "select 1 as one", "dsnSecretRef": "plain"}, ctx))
        assert out["rows"] == [{"one": 1}]
    finally:
        aio(app.aclose())


def test_the_default_wall_refuses_the_embedded_control_role_a44(registry, make_ctx, aio, roles, pg_admin_url):
    """Without a daemon telling it (a connector run on its own), the wall refuses the embedded control role `a44`."""
    asyncio.run(_admin(pg_admin_url, "do $$ begin if not exists (select from pg_roles where rolname = 'a44') then "
                                     "create role a44 login password 'pw'; end if; end $$"))
    app = AppDatabase(None)
    ctx = make_ctx(services={"app_db": app}, secrets={"a44": with_login(pg_admin_url, "a44", "pw", "postgres")})
    try:
        assert "control role" in refused(registry, aio, ctx, {"query": "select 1", "dsnSecretRef": "a44"}).message
    finally:
        aio(app.aclose())
        asyncio.run(_admin(pg_admin_url, "drop role if exists a44"))


def test_a_control_store_or_a_superuser_is_refused_from_any_source(registry, make_ctx, aio, pg_url, pg_admin_url,
                                                                    pg_template):
    """A database holding the `automation` schema, or a role with server-level powers (the test server's
    `postgres`), runs no workflow SQL, not even `select 1`: as a step's DSN, or as a project's application
    database (a template whose `ctl_{project}` is a control store)."""
    name = f"ctl_{secrets.token_hex(3)}"
    asyncio.run(_admin(pg_admin_url, f"create database {name}_pj_default template {pg_template}"))
    try:
        for url, why in ((pg_url, "automation"), (pg_admin_url, "superuser")):
            app = AppDatabase(with_database(url, name + "_{project}"))
            ctx = make_ctx(services={"app_db": app}, secrets={"sec_control": url})
            try:
                for params in ({"query": "select 1"}, {"query": "select 1", "dsnSecretRef": "sec_control"}):
                    assert why in refused(registry, aio, ctx, params).message
            finally:
                aio(app.aclose())
    finally:
        asyncio.run(_admin(pg_admin_url, f"drop database {name}_pj_default with (force)"))


def test_one_database_for_every_project_is_refused(pg_url):
    """A44_APP_DATABASE_URL without `{project}` in its database name would put every project's tables, sessions
    and settings in one database under one role."""
    for url in (pg_url, "postgresql://app_{project}@db.internal/app"):
        with pytest.raises(A44Error) as exc:
            AppDatabase(url)
        assert exc.value.code == E_SQL_UNSAFE_DATABASE and "{project}" in exc.value.hint + exc.value.message


def test_a_project_role_that_could_reach_beyond_its_project_is_refused(registry, make_ctx, aio, app_dbs,
                                                                        pg_admin_url, pg_url):
    """A project's application database connection is refused when its role owns a database, may create one, is
    a member of another role, or may connect to another known project's database or to the control database."""
    from tests.runtime.pg import database_name

    b_url = app_dbs.url("pj_b")
    a_role = database_name(app_dbs.url("pj_a"))
    b_db = database_name(b_url)
    control_db = database_name(pg_url)
    spare = f"spare_{secrets.token_hex(3)}"
    cases = [
        ([f"create database {spare} owner {a_role}"], [f"drop database {spare}"], "owns the database"),
        ([f"alter role {a_role} createdb"], [f"alter role {a_role} nocreatedb"], "may create databases"),
        ([f"grant {b_db} to {a_role}"], [f"revoke {b_db} from {a_role}"], f"is a member of {b_db}"),
        ([f"grant connect on database {b_db} to {a_role}"], [f"revoke connect on database {b_db} from {a_role}"],
         f"may connect to {b_db}"),
        ([f"grant connect on database {control_db} to {a_role}"],
         [f"revoke connect on database {control_db} from {a_role}"], f"may connect to {control_db}"),
    ]
    for grant, undo, words in cases:
        asyncio.run(_admin(pg_admin_url, *grant))
        app = AppDatabase(app_dbs.template, wall=Wall(control_role="a44", control_database=control_db))
        app.know(["pj_a", "pj_b"])
        try:
            err = refused(registry, aio, make_ctx(services={"app_db": app}, project_id="pj_a"),
                          {"query": "select 1"})
            assert words in err.message, (words, err)
        finally:
            aio(app.aclose())
            asyncio.run(_admin(pg_admin_url, *undo))
    # as provisioned: runs
    app = AppDatabase(app_dbs.template, wall=Wall(control_role="a44", control_database=control_db))
    app.know(["pj_a", "pj_b"])
    try:
        ctx = make_ctx(services={"app_db": app}, project_id="pj_a")
        assert aio(run_step(registry, "sql/execute", {"query": "select current_user as r"}, ctx))["rows"] == \
            [{"r": a_role}]
    finally:
        aio(app.aclose())


def test_a_role_setting_its_own_defaults_changes_nothing_on_a44_sessions(registry, make_ctx, aio, app_dbs):
    """`ALTER ROLE current_user SET statement_timeout = '1ms'` (any role may) and the like: a44's next connections
    pin what sql/execute relies on in their startup packet, which wins over role defaults."""
    app_dbs.url("pj_default")
    app = AppDatabase(app_dbs.template)
    ctx = make_ctx(services={"app_db": app})
    try:
        for setting, value in (("statement_timeout", "1ms"), ("search_path", "nowhere"),
                               ("default_transaction_read_only", "on"), ("lock_timeout", "1ms")):
            aio(run_step(registry, "sql/execute",
                         {"query": f"alter role current_user set {setting} = '{value}'"}, ctx))
    finally:
        aio(app.aclose())
    app = AppDatabase(app_dbs.template)      # new connections: the role's defaults would apply to them
    ctx = make_ctx(services={"app_db": app})
    try:
        out = aio(run_step(registry, "sql/execute", {
            "query": "select current_setting('statement_timeout') as st, current_setting('search_path') as sp, "
                     "current_setting('default_transaction_read_only') as ro, pg_sleep(0.05)::text as slept"}, ctx))
        assert out["rows"] == [{"st": "0", "sp": "public", "ro": "off", "slept": ""}], out
        aio(run_step(registry, "sql/execute", {"query": "create table written (x int)"}, ctx))
    finally:
        aio(app.aclose())
