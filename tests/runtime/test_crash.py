"""Crash tests with real processes (§2, §7.2): `kill -9` of a daemon mid-step, and the database restarted under
load. The far side is a loopback HTTP server; the effect is a `sql/execute` insert guarded by
`on conflict (run_id, step_id) do nothing`."""

import asyncio
import shutil
import tempfile
from pathlib import Path

import asyncpg

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.postgres.embedded import EmbeddedServer, free_port
from anthares44.automation.runtime.store.core import Store
from tests.runtime.daemon_support import EFFECTS_DDL, FarSide, ServeProcess, http_sql_workflow, wait_until
from tests.runtime.pg import AppDatabases, _admin, query


async def _setup(url: str, ir, n: int, home: Path, app_url: str) -> list[str]:
    """Migrate the control store, create `effects` in pj_default's application database (`app_url`), publish `ir`
    in pj_default and create `n` runs of it."""
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.migrate()
        await store.ensure_partitions()
        conn = await asyncpg.connect(app_url)
        await conn.execute(EFFECTS_DDL)
        await conn.close()
        await store.publish_version("pj_default", ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        return [(await store.create_run("pj_default", ir.workflow_id, {}, f"k{i}")).run_id for i in range(n)]
    finally:
        await store.close()


async def _states(url: str, run_ids) -> dict[str, str]:
    conn = await asyncpg.connect(url, statement_cache_size=0)     # through a transaction pooler too
    try:
        rows = await conn.fetch("select run_id, state from automation.runs where run_id = any($1)", list(run_ids))
        return {r["run_id"]: r["state"] for r in rows}
    finally:
        await conn.close()


def test_kill_9_mid_step_then_another_daemon_completes_the_run(pg_url, app_url, app_dbs, tmp_path):
    far = FarSide()
    ir = http_sql_workflow(far)
    (run_id,) = asyncio.run(_setup(pg_url, ir, 1, tmp_path, app_dbs.url()))
    first = ServeProcess(pg_url, tmp_path, worker_id="first", app_url=app_url)
    second = None
    try:
        assert far.held.wait(30), first.output()
        first.kill9()                                     # dies with `middle` in flight
        far.release()
        second = ServeProcess(pg_url, tmp_path, worker_id="second", app_url=app_url)
        wait_until(lambda: asyncio.run(_states(pg_url, [run_id])).get(run_id) == "succeeded", 30,
                   "the run to complete on the second daemon")
    finally:
        for p in (first, second):
            if p is not None:
                p.stop()
        far.close()
    assert far.count("/ok/first") == 1                    # completed before the crash: ran exactly once
    assert 1 <= far.count("/hold/middle") <= 2            # interrupted: at most twice
    assert {k for (p, k) in far.hits if p == "/hold/middle"} == {f"{run_id}:middle"}
    effects = query(app_dbs.url(), "select step_id from effects where run_id = $1", run_id)
    assert [r["step_id"] for r in effects] == ["effect"]
    rows = query(pg_url, "select step_id, attempt, status, worker_id from automation.step_attempts "
                         "where run_id = $1 order by started_at, attempt", run_id)
    by_step = {}
    for r in rows:
        by_step.setdefault(r["step_id"], []).append((r["status"], r["worker_id"]))
    assert by_step["first"] == [("succeeded", "first")]
    assert by_step["middle"] == [("lease_expired", "first"), ("succeeded", "second")]
    assert by_step["effect"] == [("succeeded", "second")] and by_step["done"] == [("succeeded", "second")]
    run = query(pg_url, "select lease_reclaims from automation.runs where run_id = $1", run_id)
    assert run[0]["lease_reclaims"] == 1


def test_database_restart_under_load_loses_no_run(tmp_path):
    root = Path(tempfile.mkdtemp(prefix="a44-crash-pg-"))
    server = EmbeddedServer(root, durable=True)
    server.initdb()
    port = free_port()
    server.start(port, wait_s=20)
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    apps = AppDatabases(url)
    far = FarSide(hold_s=0.2)
    ir = http_sql_workflow(far, name="restart")
    daemon = None
    try:
        # the control store is `postgres` here: as for any control database, no project role may connect to it
        asyncio.run(_admin(url, "revoke connect, temporary on database postgres from public"))
        run_ids = asyncio.run(_setup(url, ir, 30, tmp_path, apps.url()))
        daemon = ServeProcess(url, tmp_path, worker_id="survivor", extra=["--concurrency", "8"],
                              app_url=apps.template)
        wait_until(lambda: far.count("/hold/middle") >= 5, 30, "runs in flight")
        server.stop()                                      # under load: steps in flight, leases held
        asyncio.run(asyncio.sleep(1.0))
        server.start(port, wait_s=20)
        wait_until(lambda: set(asyncio.run(_states(url, run_ids)).values()) == {"succeeded"}, 60,
                   "every run to complete after the restart", interval=0.5)
        effects = query(apps.url(), "select run_id from effects where step_id = 'effect'")
        assert sorted(r["run_id"] for r in effects) == sorted(run_ids)      # each effect exactly once
        assert far.count("/ok/first") >= 30
        assert "E_DB_UNAVAILABLE" in daemon.output()      # the daemon did see the database go away
    finally:
        if daemon is not None:
            daemon.stop()
        far.close()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
