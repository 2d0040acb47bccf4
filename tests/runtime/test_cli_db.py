"""`a44 automation db ...` as a user runs it: real subprocesses, a real embedded server under a temp A44_HOME,
and the system's psql on the URL it prints."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from anthares44.automation.runtime.postgres.embedded import free_port


def a44(*args, env):
    return subprocess.run([sys.executable, "-m", "anthares44.automation.cli.main", "automation", "db", *args],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def home_env():
    # not under pytest's 0700 basetemp: the server may run as another user (root cannot run postgres)
    home = Path(tempfile.mkdtemp(prefix="a44-test-home-"))
    env = {k: v for k, v in os.environ.items() if k not in ("A44_DATABASE_URL", "A44_HOME")}
    env["A44_HOME"] = str(home)
    yield env
    a44("stop", env=env)
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.skipif(shutil.which("psql") is None, reason="no psql on this machine")
def test_db_url_round_trips_through_psql_and_the_server_is_reused(home_env):
    first = a44("url", env=home_env)
    assert first.returncode == 0, first.stderr
    url = first.stdout.strip()
    assert url.startswith("postgresql://a44:") and "@127.0.0.1:" in url     # the control role, not postgres
    psql = subprocess.run(["psql", url, "-XtAc", "select current_database() || ' ' || inet_server_addr()"],
                          capture_output=True, text=True, timeout=30)
    assert psql.returncode == 0, psql.stderr
    assert psql.stdout.strip() == "a44 127.0.0.1/32"
    # a second command finds the same server running
    state = a44("status", "--format", "json", env=home_env)
    assert state.returncode == 0 and '"running": true' in state.stdout
    assert a44("url", env=home_env).stdout.strip() == url
    migrated = a44("migrate", env=home_env)
    assert migrated.returncode == 0 and "0001_init" in migrated.stdout, migrated.stderr
    assert "0 pending" in a44("status", env=home_env).stdout
    # TCP needs the password: the URL without it is refused
    no_pw = url.split("://", 1)[0] + "://postgres@" + url.split("@", 1)[1]
    refused = subprocess.run(["psql", no_pw, "-XtAwc", "select 1"], capture_output=True, text=True, timeout=30,
                             env={**os.environ, "PGPASSWORD": ""})
    assert refused.returncode != 0
    stop = a44("stop", env=home_env)
    assert stop.returncode == 0 and "stopped" in stop.stdout
    assert a44("status", env=home_env).returncode == 3


def test_unreachable_database_url_is_a_coded_error_not_a_traceback():
    env = {**os.environ, "A44_DATABASE_URL": f"postgresql://a44:pw@127.0.0.1:{free_port()}/a44"}
    for action in ("status", "migrate"):
        out = a44(action, env=env)
        assert out.returncode == 1
        assert out.stderr.startswith("E_DB_UNAVAILABLE "), out.stderr
        assert "Traceback" not in out.stderr and ":pw@" not in out.stderr
    assert a44("url", env=env).stdout.strip() == env["A44_DATABASE_URL"]


def test_concurrent_starts_share_one_server_and_kill_9_leaves_nothing_stale(home_env):
    procs = [subprocess.Popen([sys.executable, "-m", "anthares44.automation.cli.main", "automation", "db", "url"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=home_env)
             for _ in range(3)]
    urls = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert len(urls) == 1 and all(p.returncode == 0 for p in procs)
    pid = int((Path(home_env["A44_HOME"]) / "pg" / "data" / "postmaster.pid").read_text().split()[0])
    os.kill(pid, 9)  # postmaster.pid and state.json stay behind
    again = a44("url", env=home_env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == urls.pop()  # same port and password after the restart
    assert a44("status", env=home_env).returncode == 0


def test_embedded_roles_have_no_server_powers_and_each_project_has_its_own_database(home_env):
    """`db url` is the control role `a44`, which owns the migrated `automation` schema and nothing more; `db url
    --app [--project P]` is the project's own database `a44_app_<P>`, reached by its own role. A project may create
    tables there; no role has superuser, CREATEDB, CREATEROLE, replication or server-program/file powers or any
    membership, and a project role connects to its own database only (not to another project's, nor to `a44`,
    `postgres` or `template1`). A restart keeps the same URLs. `$A44_HOME/pg` is 0700 and the server's log 0600."""
    import asyncio
    import stat

    import asyncpg

    out = a44("url", "--app", env=home_env)
    assert out.returncode == 0, out.stderr
    app = out.stdout.strip()
    assert app.startswith("postgresql://a44_app_pj_default:") and app.endswith("/a44_app_pj_default")
    other = a44("url", "--app", "--project", "pj_b", env=home_env).stdout.strip()
    assert other.startswith("postgresql://a44_app_pj_b:") and other.endswith("/a44_app_pj_b")
    assert a44("url", "--project", "pj_b", env=home_env).returncode == 2    # the control store is no project's
    control = a44("url", env=home_env).stdout.strip()
    assert a44("migrate", env=home_env).returncode == 0
    base = app.rsplit("/", 1)[0]

    async def probe():
        conn = await asyncpg.connect(app)
        try:
            await conn.execute("create table invoices (id text primary key, status text)")
            await conn.execute("insert into invoices values ('inv_1', 'open')")
            assert await conn.fetchval("select status from invoices") == "open"
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("copy (select 1) to program 'id'")
        finally:
            await conn.close()
        for database in ("a44", "postgres", "template1", "a44_app_pj_b"):     # CONNECT is not PUBLIC's
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await asyncpg.connect(f"{base}/{database}")
        conn = await asyncpg.connect(other)
        try:
            with pytest.raises(asyncpg.UndefinedTableError):                # another database, other catalogs
                await conn.execute("select * from invoices")
        finally:
            await conn.close()
        conn = await asyncpg.connect(control)
        try:
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("copy (select 1) to program 'id'")
            owners = await conn.fetch(
                "select distinct pg_get_userbyid(relowner) as owner from pg_class "
                "where relnamespace = 'automation'::regnamespace union "
                "select pg_get_userbyid(nspowner) from pg_namespace where nspname = 'automation'")
            roles = await conn.fetch(
                "select rolname, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls, "
                "array(select b.rolname from pg_auth_members m join pg_roles b on b.oid = m.roleid "
                "where m.member = r.oid) as member_of, "
                "array(select datname from pg_database where datdba = r.oid) as owns "
                "from pg_roles r where rolname in ('a44', 'a44_app_pj_default', 'a44_app_pj_b') order by rolname")
            return [r["owner"] for r in owners], [dict(r) for r in roles]
        finally:
            await conn.close()

    owners, roles = asyncio.run(probe())
    assert owners == ["a44"]
    assert roles == [{"rolname": name, "rolsuper": False, "rolcreatedb": False, "rolcreaterole": False,
                      "rolreplication": False, "rolbypassrls": False, "member_of": [],
                      "owns": ["a44"] if name == "a44" else []}
                     for name in ("a44", "a44_app_pj_b", "a44_app_pj_default")]
    pg = Path(home_env["A44_HOME"]) / "pg"
    assert stat.S_IMODE(pg.stat().st_mode) == 0o700 and stat.S_IMODE((pg / "server.log").stat().st_mode) == 0o600
    assert stat.S_IMODE((pg / "state.json").stat().st_mode) == 0o600
    assert a44("stop", env=home_env).returncode == 0
    assert a44("start", env=home_env).returncode == 0
    assert a44("url", "--app", env=home_env).stdout.strip() == app
    assert a44("url", env=home_env).stdout.strip() == control
    assert "application databases (workflow SQL): embedded, a database per project" in \
        a44("status", env=home_env).stdout

    # what a project role may do to itself (its password, its settings), `db start` undoes for every project that
    # published a workflow, the server running or not
    wf = Path(home_env["A44_HOME"]) / "w.yaml"
    wf.write_text("name: w\nversion: 1\nsteps:\n  - id: s\n    uses: pass\n    timeout: 1s\n")
    published = subprocess.run([sys.executable, "-m", "anthares44.automation.cli.main", "automation", "publish",
                                str(wf), "--project", "pj_b"], capture_output=True, text=True, env=home_env,
                               timeout=120)
    assert published.returncode == 0, published.stderr

    async def harm():
        conn = await asyncpg.connect(other)
        try:
            await conn.execute("alter role current_user set statement_timeout = '1ms'")
            await conn.execute("alter role current_user password 'chosen-by-the-project'")
        finally:
            await conn.close()

    async def still_usable() -> str | None:
        conn = await asyncpg.connect(other)
        try:
            return await conn.fetchval("select current_setting('statement_timeout')")
        finally:
            await conn.close()

    asyncio.run(harm())
    with pytest.raises(asyncpg.InvalidPasswordError):
        asyncio.run(still_usable())
    started = a44("start", env=home_env)
    assert started.returncode == 0 and "databases of 1 project(s) in order" in started.stdout, started
    assert asyncio.run(still_usable()) == "0"


def test_external_control_store_without_an_app_url_has_no_application_database():
    env = {**os.environ, "A44_DATABASE_URL": f"postgresql://a44:pw@127.0.0.1:{free_port()}/a44"}
    env.pop("A44_APP_DATABASE_URL", None)
    out = a44("url", "--app", env=env)
    assert out.returncode == 1 and out.stderr.startswith("E_SQL_NO_DATABASE "), out.stderr
    assert "A44_APP_DATABASE_URL" in out.stderr and ":pw@" not in out.stdout + out.stderr
    env["A44_APP_DATABASE_URL"] = "postgresql://app_{project}@db.internal:5432/app_{project}"
    assert a44("url", "--app", env=env).stdout.strip() == "postgresql://app_pj_default@db.internal:5432/app_pj_default"
    assert a44("url", "--app", "--project", "Billing EU", env=env).stdout.strip() == \
        "postgresql://app__e94229a660e2961977a2@db.internal:5432/app__e94229a660e2961977a2"
    env["A44_APP_DATABASE_URL"] = "postgresql://app@db.internal:5432/app"        # one database for every project
    out = a44("url", "--app", env=env)
    assert out.returncode == 1 and out.stderr.startswith("E_SQL_UNSAFE_DATABASE "), out.stderr


def test_a_fresh_home_answers_read_verbs_instead_of_a_schema_error(home_env):
    def verb(*args):
        return subprocess.run([sys.executable, "-m", "anthares44.automation", "automation", *args],
                              capture_output=True, text=True, env=home_env, timeout=120)

    runs = verb("runs", "--format", "json")
    assert runs.returncode == 0, runs.stderr
    assert '"total": 0' in runs.stdout and "E_DB_SCHEMA" not in runs.stderr
    dlq = verb("dlq", "list")
    assert dlq.returncode == 0 and "E_DB_SCHEMA" not in dlq.stderr, dlq.stderr
    missing = verb("logs", "run_01J9XQ")
    assert missing.returncode == 1 and missing.stderr.startswith("E_RUN_NOT_FOUND"), missing.stderr
