"""Replay (§13): a new epoch per replay, reused results read from the log (zero calls to their connectors),
`--to-version` proven by comparing the IR before the cut, the dry-run document, idempotent re-runs, refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, timedelta
from pathlib import Path

import pytest

from anthares44.automation.app.automation import Automation
from anthares44.automation.app.replay import replay
from anthares44.automation.attempts import Attempt
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.replay import Cut
from anthares44.automation.runtime.replay.plan import plan_run
from tests.runtime.engine_support import PROJECT, engine, node, publish_and_run, workflow

A44 = str(Path(sys.executable).parent / "a44")


class Endpoint:
    """A connector standing in for one endpoint of the far side; counts calls; `broken` answers 400 (the bug)."""

    params_model = None

    def __init__(self, name: str, broken: bool = False):
        self.name = name
        self.broken = broken
        self.calls = 0

    async def invoke(self, params, ctx):
        self.calls += 1
        if self.broken:
            raise A44Error("E_UPSTREAM_400", f"{self.name}: bad request (the bug)")
        return {"endpoint": self.name, "run": ctx.run_id, "step": ctx.step_id}


def _onboard(version: int, provision_uses: str, create_params: dict | None = None):
    return workflow([
        node("create-tenant", uses="tenants", params=create_params or {"name": "acme"}),
        node("provision-db", uses=provision_uses),
        node("cooldown", sleep_ms=30_000),
        node("notify-owner", uses="notify"),
    ], name="tenant_onboard", version=version)


async def _setup(store, clock, n: int):
    tenants, v1, v2, notify = Endpoint("tenants"), Endpoint("dbs_v1", broken=True), Endpoint("dbs_v2"), Endpoint("notify")
    eng = engine(store, tenants, v1, v2, notify, clock=clock, concurrency=100)
    ir1 = _onboard(1, "dbs_v1")
    await store.publish_version(PROJECT, ir1.workflow_id, 1, ir1.sha256, to_json(ir1))
    ids = [(await store.create_run(PROJECT, ir1.workflow_id, {"i": i}, f"k{i}")).run_id for i in range(n)]
    await eng.drive()
    return eng, ids, (tenants, v1, v2, notify)


async def _states(store, ids):
    out = {}
    for r in ids:
        s = (await store.get_run(r))["state"]
        out[s] = out.get(s, 0) + 1
    return out


def test_replay_400_failed_runs_after_a_fix_reuses_earlier_steps(store, clock, aio):
    async def body():
        eng, ids, (tenants, v1, v2, notify) = await _setup(store, clock, 400)
        assert await _states(store, ids) == {"failed": 400}
        assert tenants.calls == 400 and v1.calls == 400 and notify.calls == 0
        # the fix: provision-db now calls the new endpoint; everything before the cut is unchanged
        ir2 = _onboard(2, "dbs_v2")
        await store.publish_version(PROJECT, ir2.workflow_id, 2, ir2.sha256, to_json(ir2))
        auto = Automation(store)
        dry = await replay(auto, state="failed", step="provision-db", since="48h", from_step="provision-db",
                           to_version=2, dry_run=True)
        assert dry["matched"] == 400
        assert dry["perRun"] == {"reused": ["create-tenant"], "replayed": ["provision-db", "cooldown", "notify-owner"]}
        assert await _states(store, ids) == {"failed": 400}          # a dry run changes nothing
        doc = await replay(auto, state="failed", step="provision-db", since="48h", from_step="provision-db",
                           to_version=2)
        assert doc["replayed"] == 400 and doc["skipped"] == 0
        assert await _states(store, ids) == {"pending": 400}
        await eng.drive()
        clock.advance(timedelta(seconds=31))
        await eng.drive()
        assert await _states(store, ids) == {"succeeded": 400}
        assert tenants.calls == 400                 # zero calls to the reused step's endpoint
        assert v1.calls == 400 and v2.calls == 400 and notify.calls == 400
        run = await store.get_run(ids[0])
        assert run["epoch"] == 1 and run["version"] == 2
        rows = await store.list_attempts(ids[0])
        got = sorted((a["epoch"], a["step_id"], a["status"], a["worker_id"] == "reused") for a in rows)
        assert got == [(0, "create-tenant", "succeeded", False), (0, "provision-db", "failed", False),
                       (1, "cooldown", "succeeded", False), (1, "create-tenant", "succeeded", True),
                       (1, "notify-owner", "succeeded", False), (1, "provision-db", "succeeded", False)]
        # the reused result is the original one (what create-tenant returned in epoch 0)
        reused = next(a for a in rows if a["epoch"] == 1 and a["step_id"] == "create-tenant")
        assert store.load_result(reused)["endpoint"] == "tenants"
        # the same command again: those runs are succeeded now; nothing is replayed twice
        again = await replay(auto, run_ids=ids[:3], from_step="provision-db", to_version=2, dry_run=False)
        assert again["replayed"] == 3       # different selection = different request: explicit ids replay again
    aio(body())


def test_interrupted_mass_replay_rerun_replays_no_run_twice(store, clock, aio):
    async def body():
        eng, ids, (tenants, *_rest) = await _setup(store, clock, 30)
        auto = Automation(store)
        seen = []

        def progress(done, total):
            seen.append(done)
            if done == 12:
                raise KeyboardInterrupt     # the operator hits ^C in the middle

        with pytest.raises(KeyboardInterrupt):
            await replay(auto, workflow="tenant_onboard", since="7d", from_step="provision-db", progress=progress)
        assert await _states(store, ids) == {"pending": 12, "failed": 18}
        # the replayed ones run (and fail again: the bug is not fixed on v1) before the command is re-run
        await eng.drive()
        assert await _states(store, ids) == {"failed": 30}
        doc = await replay(auto, workflow="tenant_onboard", since="7d", from_step="provision-db")
        assert doc["replayed"] == 18 and doc["skipped"] == 12
        for r in ids:
            run = await store.get_run(r)
            assert run["epoch"] == 1
        assert tenants.calls == 30
    aio(body())


def test_not_terminal_runs_are_refused_and_compensation_failed_ignored(store, clock, aio):
    async def body():
        tenants = Endpoint("tenants")
        eng = engine(store, tenants, clock=clock)
        ir = workflow([node("a", uses="tenants"), node("b", uses="tenants")], name="two")
        pending = await publish_and_run(store, ir, key="p1")
        auto = Automation(store)
        with pytest.raises(A44Error) as exc:
            await replay(auto, run_ids=[pending], from_step="b", dry_run=True)
        assert exc.value.code == "E_REPLAY_NOT_TERMINAL" and pending in exc.value.message
        await eng.drive()
        conn_run = await publish_and_run(store, ir, key="p2")
        await eng.drive()
        # put one run in compensation_failed directly (the engine's own tests cover how it gets there)
        async with store.connection("test") as conn, conn.transaction():
            await conn.execute("update automation.runs set state = 'compensation_failed' where run_id = $1", conn_run)
        doc = await replay(auto, workflow="two", since="1h", from_step="b", dry_run=True)
        assert doc["matched"] == 1
        assert doc["warnings"] == ["1 run in compensation_failed was ignored"]
        assert doc["perRun"] == {"reused": ["a"], "replayed": ["b"]}
        with pytest.raises(A44Error) as exc:
            await replay(auto, workflow="two", since="1h", from_step="nope", dry_run=True)
        assert exc.value.code == "E_REPLAY_UNKNOWN_STEP"
    aio(body())


def test_to_version_refused_when_a_step_before_the_cut_changed(store, clock, aio):
    async def body():
        eng, ids, _ = await _setup(store, clock, 2)
        ir3 = _onboard(3, "dbs_v2", create_params={"name": "acme", "plan": "gold"})
        await store.publish_version(PROJECT, ir3.workflow_id, 3, ir3.sha256, to_json(ir3))
        auto = Automation(store)
        with pytest.raises(A44Error) as exc:
            await replay(auto, run_ids=ids, from_step="provision-db", to_version=3, dry_run=True)
        assert exc.value.code == "E_REPLAY_VERSION_MISMATCH" and "create-tenant" in exc.value.message
        # cutting at the changed step is fine: nothing before it is reused
        doc = await replay(auto, run_ids=ids, from_step="create-tenant", to_version=3, dry_run=True)
        assert doc["perRun"]["reused"] == []
    aio(body())


def test_from_time_cut_and_dag_descendants():
    from datetime import datetime

    ir = workflow([node("a"), node("b"), node("c"), node("d")], edges=[("a", "b"), ("a", "c"), ("b", "d")])
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    att = [Attempt(s, "action", 1, "succeeded", t0 + timedelta(seconds=i), t0 + timedelta(seconds=i + 1), seq=i)
           for i, s in enumerate(["a", "c", "b"])] + \
          [Attempt("d", "action", 1, "failed", t0 + timedelta(seconds=5), t0 + timedelta(seconds=6), seq=9)]
    p = plan_run("r", ir, att, Cut(from_step="b"))
    assert (p.reused, p.replayed) == (["a", "c"], ["b", "d"])      # c is a parallel branch, not after b
    p = plan_run("r", ir, att, Cut(from_time=t0 + timedelta(seconds=1.5)))
    assert (p.reused, p.replayed) == (["a"], ["b", "c", "d"])


def test_cli_dry_run_prints_the_manual_document(store, clock, aio, pg_url, tmp_path):
    async def body():
        tenants = Endpoint("tenants")
        v1 = Endpoint("dbs_v1", broken=True)
        eng = engine(store, tenants, v1, Endpoint("notify"), clock=clock)
        ir1 = _onboard(1, "dbs_v1")
        await store.publish_version(PROJECT, ir1.workflow_id, 1, ir1.sha256, to_json(ir1))
        for i in range(5):
            await store.create_run(PROJECT, ir1.workflow_id, {}, f"k{i}")
        await eng.drive()
        clock.advance(timedelta(seconds=1))
    aio(body())
    env = {**os.environ, "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path)}
    cmd = [A44, "automation", "replay", "--state", "failed", "--step", "provision-db", "--workflow", "tenant-onboard",
           "--from-step", "provision-db", "--dry-run"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert list(doc) == ["matched", "fromStep", "perRun", "estimatedDurationSeconds", "warnings"]
    assert doc["matched"] == 5 and doc["fromStep"] == "provision-db"
    assert doc["perRun"] == {"reused": ["create-tenant"], "replayed": ["provision-db", "cooldown", "notify-owner"]}
    assert isinstance(doc["estimatedDurationSeconds"], int) and doc["estimatedDurationSeconds"] >= 30
    assert doc["warnings"] == []
    # nothing changed
    states = aio(store.fetch("replay_select", project=PROJECT, run_ids=None, state=None, workflow=None, step=None,
                             since=None))
    assert {r["state"] for r in states} == {"failed"} and {r["epoch"] for r in states} == {0}
    # a real replay, then `logs` shows the epochs and the reused row
    out = subprocess.run(cmd[:-1], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "replayed: 5" in out.stdout
    run_id = states[0]["run_id"]
    logs = subprocess.run([A44, "automation", "logs", run_id], env=env, capture_output=True, text=True, timeout=60)
    assert logs.returncode == 0, logs.stderr
    assert "EPOCH" in logs.stdout and "succeeded (reused)" in logs.stdout
    out = subprocess.run(cmd[:-1], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "replayed: 0" in out.stdout     # pending now: not terminal, skipped
