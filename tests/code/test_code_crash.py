"""The manual's tenant-onboard example (§12) published with the real CLI and run by a real `a44 automation serve`
that is killed with SIGKILL during `provision-db`: a second daemon resumes the run from the log and never calls
`create-tenant` again."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

import asyncpg

from tests.code.support import StandIn, write_modules
from tests.runtime.daemon_support import A44, ServeProcess, wait_until


def _state(url: str, run_id: str) -> str:
    async def q():
        conn = await asyncpg.connect(url)
        try:
            return await conn.fetchval("select state from automation.runs where run_id = $1", run_id)
        finally:
            await conn.close()
    return asyncio.run(q())


def _rows(url: str, run_id: str):
    async def q():
        conn = await asyncpg.connect(url)
        try:
            return await conn.fetch("select step_id, status, worker_id from automation.step_attempts "
                                    "where run_id = $1 and step_id not like 'ctx.%' order by started_at, attempt",
                                    run_id)
        finally:
            await conn.close()
    return [tuple(r) for r in asyncio.run(q())]


def test_kill_9_during_provision_db_resumes_without_recreating_the_tenant(pg_url, tmp_path, monkeypatch):
    api = StandIn(db_mode="hold")
    monkeypatch.setenv("ONBOARD_API", api.url)
    module = write_modules(tmp_path / "mods")
    env = {**os.environ, "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path)}
    pub = subprocess.run([A44, "automation", "publish", str(module)], env=env, capture_output=True, text=True,
                         timeout=60)
    assert pub.returncode == 0, pub.stdout + pub.stderr
    assert "wf_tenant_onboard v4 created" in pub.stdout
    out = subprocess.run([A44, "automation", "run", "tenant-onboard", "--input", '{"name": "acme"}',
                          "--idempotency-key", "onboard-acme", "--format", "json"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    run_id = json.loads(out.stdout)["run_id"]
    first = ServeProcess(pg_url, tmp_path, worker_id="first")
    second = None
    try:
        assert api.held.wait(30), first.output()
        first.kill9()                                   # dies with provision-db in flight
        api.db_mode = "ok"
        api.release()
        second = ServeProcess(pg_url, tmp_path, worker_id="second")
        wait_until(lambda: _state(pg_url, run_id) == "sleeping", 30, "the run to reach its durable sleep")
    finally:
        for p in (first, second):
            if p is not None:
                p.stop()
        api.close()
    assert api.calls["create-tenant"] == 1               # recorded before the crash: read from the log
    assert 1 <= api.calls["provision-db"] <= 2
    rows = _rows(pg_url, run_id)
    assert rows[0] == ("create-tenant", "succeeded", "first")
    assert ("provision-db", "lease_expired", "first") in rows and ("provision-db", "succeeded", "second") in rows
    assert ("cooldown", "running", "second") in rows
    logs = subprocess.run([A44, "automation", "logs", run_id], env=env, capture_output=True, text=True, timeout=60)
    assert logs.returncode == 0 and "provision-db" in logs.stdout
