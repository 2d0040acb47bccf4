"""Workflows in code (§12) on the in-process engine: the manual's tenant-onboard example as written, durable
sleep (the function re-executes from the top and is fast-forwarded through the log), retries, compensation,
ctx.now() recorded, non-determinism detected, replay (§13) of a code run."""

from __future__ import annotations

from datetime import timedelta

import pytest

from anthares44.automation.app.automation import Automation
from anthares44.automation.app.replay import replay
from tests.code.support import ONBOARD, StandIn, published_code, write_modules
from tests.runtime.engine_support import engine


@pytest.fixture
def stand_in(monkeypatch):
    s = StandIn()
    monkeypatch.setenv("ONBOARD_API", s.url)
    yield s
    s.close()


async def _publish_and_run(store, path, key="k1", name="acme"):
    auto = Automation(store)
    report = await auto.publish([str(path)])
    assert report.ok and [(w.workflow_id, w.version, w.outcome) for w in report.workflows] == \
        [("wf_tenant_onboard", 4, "created")]
    assert (await auto.publish([str(path)])).workflows[0].outcome == "unchanged"
    handle = await auto.run("tenant-onboard", {"name": name}, key)
    return auto, handle.run_id


def test_tenant_onboard_runs_as_written(store, clock, aio, stand_in, tmp_path):
    async def body():
        path = write_modules(tmp_path / "m1")
        auto, run_id = await _publish_and_run(store, path)
        eng = engine(store, clock=clock)
        await eng.drive()
        run = await store.get_run(run_id)
        assert run["state"] == "sleeping"
        assert stand_in.calls == {"create-tenant": 1, "provision-db": 1}
        assert stand_in.keys == [f"{run_id}:create-tenant"]          # ctx.idempotency_key inside the step
        clock.advance(timedelta(seconds=31))
        await eng.drive()
        run = await store.get_run(run_id)
        assert run["state"] == "succeeded", run
        assert run["result"]["tenant_id"] == "t_acme"
        assert run["result"]["at"].startswith(clock.now().date().isoformat())
        assert stand_in.calls == {"create-tenant": 1, "provision-db": 1}   # fast-forwarded, not re-run
        logs = await auto.logs(run_id)
        assert sorted((a["step_id"], a["status"]) for a in logs) == [
            ("cooldown", "succeeded"), ("create-tenant", "succeeded"), ("ctx.now#1", "succeeded"),
            ("provision-db", "succeeded")]
        # its history exported as a replay fixture replays to the same result without a database
        from anthares44.automation.sdk import replay_fixture
        from anthares44.automation.sdk.fixtures import export_history
        from anthares44.automation.sdk.loader import import_path
        got = await replay_fixture(import_path(path).onboard, await export_history(store, run_id))
        assert got["outcome"] == "completed" and got["result"] == run["result"]
        # replay (§13) of a code run from provision-db: create-tenant is read from the log
        dry = await replay(auto, run_ids=[run_id], from_step="provision-db", dry_run=True)
        assert dry["perRun"] == {"reused": ["create-tenant"], "replayed": ["provision-db", "cooldown"]}
        doc = await replay(auto, run_ids=[run_id], from_step="provision-db")
        assert doc["replayed"] == 1
        await eng.drive()
        clock.advance(timedelta(seconds=31))
        await eng.drive()
        run = await store.get_run(run_id)
        assert run["state"] == "succeeded" and run["epoch"] == 1
        assert stand_in.calls == {"create-tenant": 1, "provision-db": 2}
    aio(body())


def test_permanent_failure_compensates_in_reverse_order(store, clock, aio, stand_in, tmp_path):
    stand_in.db_mode = "fail"
    src = ONBOARD.replace('''    await step.sleep("cooldown", "30s")''', '''    await step.run("configure", timeout="5s", fn=lambda: api.databases.create(tenant_id="x"))
    await step.sleep("cooldown", "30s")''')
    # provision-db fails on the stand-in after create-tenant (no compensate) -> no compensation at all
    async def body():
        auto, run_id = await _publish_and_run(store, write_modules(tmp_path / "m2", src))
        eng = engine(store, clock=clock)
        await eng.drive()
        run = await store.get_run(run_id)
        assert run["state"] == "failed" and run["failed_step"] == "provision-db"
        assert run["error_code"] == "E_CONNECTOR_FAILED"
        assert stand_in.calls["drop-db"] == 0
    aio(body())


COMPENSATED = '''from anthares44.automation import workflow, step

calls = []


@workflow("saga", version=1)
async def saga(ctx, input):
    a = await step.run("a", fn=lambda: {"id": "A"}, compensate=lambda: calls.append("undo-a"))
    await step.run("b", fn=lambda: {"id": "B"}, compensate=lambda: calls.append("undo-b"))
    await step.run("c", fn=_boom, retry={"max": 1, "strategy": "fixed", "base": "2s"})
    return a


async def _boom():
    calls.append("c")
    raise ConnectionError("down")
'''


def test_retry_then_compensation_with_durable_waits(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "saga.py", COMPENSATED)
        run_id = (await auto.run("saga", {}, "s1")).run_id
        eng = engine(store, clock=clock)
        await eng.drive()
        assert (await store.get_run(run_id))["state"] == "waiting"        # retry due in 2 s, lease released
        clock.advance(timedelta(seconds=2))
        await eng.drive()
        assert (await store.get_run(run_id))["state"] == "compensating"   # first compensation waits 5 s
        clock.advance(timedelta(seconds=5))
        await eng.drive()
        clock.advance(timedelta(seconds=5))
        await eng.drive()
        run = await store.get_run(run_id)
        assert run["state"] == "failed" and run["failed_step"] == "c" and run["error_code"] == "E_NETWORK"
        from anthares44.automation.sdk.loader import import_path
        assert import_path(tmp_path / "saga.py").calls == ["c", "c", "undo-b", "undo-a"]
        rows = [(a["step_id"], a["kind"], a["status"]) for a in await store.list_attempts(run_id)]
        assert ("b", "compensation", "compensated") in rows and ("a", "compensation", "compensated") in rows
    aio(body())


DIVERGES = '''from anthares44.automation import workflow, step

FLAG = {"left": True}


@workflow("diverge", version=1)
async def diverge(ctx, input):
    await step.run("first", fn=lambda: 1)
    if FLAG["left"]:                       # not deterministic: read outside a step
        await step.run("left", fn=lambda: 2)
    else:
        await step.run("right", fn=lambda: 3)
    await step.sleep("nap", "10s")
    return {"t": ctx.now(), "r": ctx.random()}
'''


def test_divergence_blocks_the_run_with_nondeterministic_replay(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "diverge.py", DIVERGES)
        run_id = (await auto.run("diverge", {}, "d1")).run_id
        eng = engine(store, clock=clock)
        await eng.drive()
        assert (await store.get_run(run_id))["state"] == "sleeping"
        from anthares44.automation.sdk.loader import import_path
        import_path(tmp_path / "diverge.py").FLAG["left"] = False
        clock.advance(timedelta(seconds=11))
        await eng.drive()
        run = await store.get_run(run_id)
        assert run["state"] == "blocked_version" and run["error_code"] == "E_NONDETERMINISTIC_REPLAY"
        assert "'left'" in run["error_message"] and "'right'" in run["error_message"]
        assert run["failed_step"] == "right"
    aio(body())


def test_ctx_values_are_recorded_once(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "values.py", DIVERGES.replace('"diverge"', '"values"'))
        run_id = (await auto.run("values", {}, "v1")).run_id
        eng = engine(store, clock=clock)
        await eng.drive()
        clock.advance(timedelta(seconds=11))
        await eng.drive()
        run = await store.get_run(run_id)
        assert run["state"] == "succeeded"
        rows = {a["step_id"]: a for a in await store.list_attempts(run_id)}
        assert store.load_result(rows["ctx.random#1"]) == run["result"]["r"]
        assert run["result"]["t"].startswith(clock.now().date().isoformat())
    aio(body())
