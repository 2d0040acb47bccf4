"""One saga for both drivers (§6.1, §6.2): a code workflow and a YAML-shaped (IR) workflow of the same shape, whose
one compensation keeps failing, go through the same durable waits (5 s, 20 s, 60 s), the same state changes and the
same compensation rows, and end `compensation_failed` with an alert of the same shape."""

from __future__ import annotations

from datetime import timedelta

from tests.code.support import published_code
from tests.runtime.engine_support import Script, engine, node, publish_and_run, state_changes, workflow

FAILING_UNDO = '''from anthares44.automation import workflow, step


def undo_a():
    raise ConnectionError("the far side is down")


def fail():
    raise ValueError("no")


@workflow("saga-fails", version=1)
async def saga(ctx, input):
    await step.run("a", fn=lambda: {"id": "A"}, compensate=undo_a)
    await step.run("b", fn=fail)
'''


async def _drive_through_budget(store, clock, eng, run_id) -> list:
    """Drive the run until its compensation budget is spent; the due times, as offsets from the failure."""
    await eng.drive()
    t0 = clock.now()
    offsets = []
    for wait in (5, 20, 60):
        run = await store.get_run(run_id)
        assert run["state"] == "compensating" and run["lease_owner"] is None
        offsets.append((run["next_wake_at"] - t0).total_seconds())
        clock.advance(timedelta(seconds=wait))
        t0 = clock.now()
        await eng.drive()
    return offsets


async def _outcome(store, run_id) -> dict:
    run = await store.get_run(run_id)
    (alert,) = [e for e in await store.list_run_events(run_id) if e["kind"] == "alert"]
    comps = [(a["step_id"], a["attempt"], a["status"]) for a in await store.list_attempts(run_id)
             if a["kind"] == "compensation"]
    return {"state": run["state"], "error_code": run["error_code"], "changes": await state_changes(store, run_id),
            "compensations": comps, "alert": alert["data"]}


def test_code_and_yaml_runs_share_one_saga(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "saga_fails.py", FAILING_UNDO)
        code_run = (await auto.run("saga-fails", {}, "c1")).run_id
        code = await _drive_through_budget(store, clock, engine(store, clock=clock), code_run)

        undo = Script("undo", plan={"a": ["retry", "retry", "retry"]})
        dag_run = await publish_and_run(store, workflow([node("a", compensate="undo"), node("b")]), key="d1")
        dag = await _drive_through_budget(store, clock, engine(store, Script(plan={"b": ["perm"]}), undo,
                                                               clock=clock), dag_run)
        assert code == dag == [5.0, 20.0, 60.0]

        c, d = await _outcome(store, code_run), await _outcome(store, dag_run)
        assert c["state"] == d["state"] == "compensation_failed"
        assert c["error_code"] == d["error_code"] == "E_COMPENSATION_FAILED"
        assert c["changes"] == d["changes"]
        assert c["compensations"] == d["compensations"] == [("a", 1, "failed"), ("a", 2, "failed"),
                                                            ("a", 3, "compensation_failed")]
        assert set(c["alert"]) == set(d["alert"])
        assert (c["alert"]["failed_step"], c["alert"]["compensation_step"], c["alert"]["attempts"]) == ("b", "a", 3)
        assert c["alert"]["compensation_error_code"] == "E_NETWORK"
        # the person the alert calls sees what kept failing, with what, and where to list such runs
        assert c["alert"]["recommended_action"] == (
            f"undo the effect of step a of run {code_run} by hand (its compensation undo_a kept failing with "
            f"E_NETWORK); the run stays compensation_failed: list with "
            f"`a44 automation runs --state compensation_failed`")
        assert d["alert"]["recommended_action"] == c["alert"]["recommended_action"] \
            .replace(code_run, dag_run).replace("undo_a", "undo").replace("E_NETWORK", "E_UPSTREAM_503")
    aio(body())
