"""`runs cancel` on the test database with the engine driven in-process: a pending or sleeping run is cancelled
at once (one transition, who and why in the log), a running one at its driver's next safe point (its in-flight
call cancelled, the attempt recorded `cancelled`), `--compensate` undoes the completed steps first, a queue run is
neither redelivered nor dead-lettered, a finished run refuses and a cancelled one says so."""

from __future__ import annotations

import asyncio
import json

import pytest

from anthares44.automation.compiler.ir import seal, to_json
from anthares44.automation.compiler.models.queues import Queue
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime import queues as rq
from anthares44.automation.runtime.engine.cancels import cancel
from anthares44.automation.runtime.engine.states import is_legal
from tests.cli_support import run_cli
from tests.runtime.engine_support import (
    PROJECT,
    Script,
    attempts,
    engine,
    node,
    publish_and_run,
    run_row,
    state_changes,
    workflow,
)


@pytest.fixture
def db(pg_url, monkeypatch):
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    monkeypatch.delenv("A44_PROJECT", raising=False)
    return pg_url


def cli(capsys, *argv):
    return run_cli(capsys, "automation", *argv)


def _events(store, aio, run_id, kind):
    return [e for e in aio(store.list_run_events(run_id)) if e["kind"] == kind]


async def _cancel_mid_call(store, eng, script, run_id, step, **kw):
    """Start a visit, cancel the run once `step`'s call is in flight, tell the engine as the daemon would on
    NOTIFY a44_run_cancel. Returns (the visit's task, the cancel's answer)."""
    visit = asyncio.create_task(eng.run_once())
    while script.called(step) == 0:
        await asyncio.sleep(0.01)
    out = await cancel(store, PROJECT, run_id, by="ana", **kw)
    eng.cancel_requested(run_id)
    return visit, out


def test_a_pending_run_is_cancelled_at_once_and_a_second_cancel_says_so(store, aio, db, capsys):
    run_id = aio(publish_and_run(store, workflow([node("a")])))
    code, out, err = cli(capsys, "runs", "cancel", run_id, "--reason", "wrong input", "--by", "ana",
                         "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["outcome"], doc["state"], doc["previous_state"]) == ("cancelled", "cancelled", "pending")
    run = aio(run_row(store, run_id))
    assert (run["state"], run["error_code"], run["next_wake_at"]) == ("cancelled", "E_RUN_CANCELLED", None)
    assert run["finished_at"] is not None and run["error_message"] == "cancelled by ana: wrong input"
    (asked,) = _events(store, aio, run_id, "run.cancel_requested")
    assert asked["data"] == {"by": "ana", "reason": "wrong input", "compensate": False}
    assert aio(state_changes(store, run_id)) == [("pending", "cancelled")]
    assert not _events(store, aio, run_id, "alert")        # a cancel is not a failure
    code, out, _ = cli(capsys, "logs", run_id)
    assert code == 0 and out.splitlines()[1] == "cancelled by ana: wrong input"     # who and why
    code, out, _ = cli(capsys, "runs", "cancel", run_id)
    assert code == 0 and out == f"{run_id} was already cancelled\n"
    code, out, _ = cli(capsys, "runs", "--state", "cancelled", "--format", "json")
    assert [r["run_id"] for r in json.loads(out)["runs"]] == [run_id]
    assert len(_events(store, aio, run_id, "run.cancel_requested")) == 1
    code, out, _ = cli(capsys, "metrics", "--name", "automation_runs", "--format", "json")
    assert code == 0 and [(m["labels"]["state"], m["value"]) for m in json.loads(out)["metrics"]] == \
        [("cancelled", 1)]                                  # runs by state count it


def test_a_finished_run_refuses_and_an_unknown_run_is_not_found(store, aio, clock, db, capsys):
    run_id = aio(publish_and_run(store, workflow([node("a")])))
    aio(engine(store, Script(), clock=clock).drive())
    code, _, err = cli(capsys, "runs", "cancel", run_id)
    assert code == 1 and "E_CANCEL_NOT_ALLOWED" in err and "succeeded" in err
    assert aio(run_row(store, run_id))["state"] == "succeeded"
    code, _, err = cli(capsys, "runs", "cancel", "run_nope")
    assert code == 1 and "E_RUN_NOT_FOUND" in err


def test_a_sleeping_run_is_cancelled_at_once_and_its_sleep_ends_cancelled(store, aio, clock):
    run_id = aio(publish_and_run(store, workflow([node("a"), node("nap", sleep_ms=3_600_000), node("b")])))
    script = Script()
    eng = engine(store, script, clock=clock)
    assert aio(eng.drive()) == {run_id: "sleeping"}
    out = aio(cancel(store, PROJECT, run_id, by="ana", reason="not needed"))
    assert (out["outcome"], out["previous_state"]) == ("cancelled", "sleeping")
    assert aio(attempts(store, run_id))[-1] == ("nap", "action", 1, "cancelled", "E_RUN_CANCELLED")
    clock.advance(7200)
    assert aio(eng.drive()) == {}                           # nothing is due any more: b never runs
    assert script.called("b") == 0


# a then b; or a, then two branches: b (its call in flight when the cancel comes) and nap (a sleep under way)
@pytest.mark.parametrize("nodes, edges", [([node("a"), node("b")], None),
                                          ([node("a"), node("b"), node("nap", sleep_ms=3600_000)],
                                           [("a", "b"), ("a", "nap")])], ids=["one-branch", "a-sleep-beside"])
def test_a_running_run_stops_at_the_next_safe_point_with_its_call_cancelled(store, aio, clock, nodes, edges):
    run_id = aio(publish_and_run(store, workflow(nodes, edges)))
    script = Script(plan={"b": ["block:never"]})
    eng = engine(store, script, clock=clock)

    async def go():
        visit, out = await _cancel_mid_call(store, eng, script, run_id, "b", reason="stop")
        assert (out["outcome"], out["state"]) == ("requested", "running")
        return await asyncio.wait_for(visit, 10)

    assert aio(go()) == {run_id: "cancelled"}
    # the sleep under way ends with the run, and its end wakes nothing
    assert sorted(aio(attempts(store, run_id))) == [("a", "action", 1, "succeeded", None),
                                                    ("b", "action", 1, "cancelled", "E_RUN_CANCELLED")] + \
        [("nap", "action", 1, "cancelled", "E_RUN_CANCELLED")] * (len(nodes) == 3)
    assert aio(run_row(store, run_id))["next_wake_at"] is None
    changes = aio(state_changes(store, run_id))
    assert changes[-1] == ("running", "cancelled") and all(is_legal(a, b) for a, b in changes)


def test_compensate_undoes_the_completed_steps_then_the_run_ends_cancelled(store, aio, clock):
    run_id = aio(publish_and_run(store, workflow([node("a", compensate="undo"), node("b", compensate="undo"),
                                                  node("c")])))
    script, undo = Script(plan={"c": ["block:never"]}), Script("undo")
    eng = engine(store, script, undo, clock=clock)

    async def go():
        visit, out = await _cancel_mid_call(store, eng, script, run_id, "c", compensate=True)
        assert out["outcome"] == "requested"
        return await asyncio.wait_for(visit, 10)

    assert aio(go()) == {run_id: "compensating"}            # the first compensation waits 5 s, durably
    for _ in range(2):
        clock.advance(5)
        aio(eng.drive())
    assert [(c[0], c[1]) for c in undo.calls] == [("b", "compensation"), ("a", "compensation")]
    run = aio(run_row(store, run_id))
    assert (run["state"], run["error_code"]) == ("cancelled", "E_RUN_CANCELLED")
    assert aio(state_changes(store, run_id))[-2:] == [("running", "compensating"), ("compensating", "cancelled")]
    assert not _events(store, aio, run_id, "alert")


def test_a_cancelled_queue_run_is_neither_redelivered_nor_dead_lettered(store, aio, clock):
    aio(rq.store_queues(store, PROJECT, [Queue(id="q_c", maxAttempts=3)]))
    ir = seal(workflow([node("s1")], name="qc").model_copy(update={"queue": "q_c"}))
    aio(store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir)))
    raw = (b'{"id":"evt_c","type":"t","idempotency_key":"k-c","partition_key":null,'
           b'"occurred_at":"2026-07-19T14:02:11.884Z","attempt":1,"data":{}}')
    run_id = aio(rq.deliver_envelope(store, PROJECT, ir.workflow_id, raw))["run_id"]
    aio(cancel(store, PROJECT, run_id, by="ana"))
    aio(engine(store, Script(), clock=clock).drive())
    assert aio(store.fetch("dlq_list", project=PROJECT, queue=None, limit=10)) == []

    async def states():
        async with store.connection("t") as c:
            return [r[0] for r in await c.fetch("select state from automation.runs")]
    assert aio(states()) == ["cancelled"]                   # no second delivery


def test_an_exclusive_steps_call_is_not_cancelled_its_result_is_recorded_first(store, aio, clock):
    """An exclusive step's effect may be committed on the far side: the cancel waits for its answer, records it,
    then stops the run (nothing after it runs)."""
    run_id = aio(publish_and_run(store, workflow([node("pay", exclusive=True), node("after")])))
    script = Script(plan={"pay": ["block:answer"]})
    eng = engine(store, script, clock=clock)

    async def go():
        visit, _ = await _cancel_mid_call(store, eng, script, run_id, "pay")
        await asyncio.sleep(0.2)
        assert not visit.done()                  # still waiting for the far side's answer
        script.events["answer"].set()
        return await asyncio.wait_for(visit, 10)

    assert aio(go()) == {run_id: "cancelled"}
    assert aio(attempts(store, run_id)) == [("pay", "action", 1, "succeeded", None)]
    assert script.called("after") == 0


class FailsWhenTold(Script):
    """A call that answers 503 (retryable) once the test says so."""

    async def invoke(self, params, ctx):
        self.calls.append((ctx.step_id, "action", ctx.attempt, ctx.idempotency_key))
        await self.events["answer"].wait()
        raise A44Error("E_UPSTREAM_503", "busy")


def test_a_daemon_not_driving_the_run_settles_a_cancel_its_holder_let_go_unheard(store, aio, clock):
    run_id = aio(publish_and_run(store, workflow([node("a", retry=(3, "fixed"), base_ms=10_000)])))
    script = FailsWhenTold()
    holder, other = engine(store, script, clock=clock, worker_id="w1"), engine(store, clock=clock, worker_id="w2")

    async def settled(eng):
        while eng._settles:                  # the settle the notification started
            await asyncio.sleep(0.01)
        return (await run_row(store, run_id))["state"]

    async def go():
        visit = asyncio.create_task(holder.run_once())
        while not script.called("a"):
            await asyncio.sleep(0.01)
        out = await cancel(store, PROJECT, run_id, by="ana", reason="stop")
        assert (out["outcome"], out["state"]) == ("requested", "running")
        other.cancel_requested(run_id)       # w2 heard the NOTIFY; w1 (the holder) did not
        assert await settled(other) == "running"         # w1 holds it: w2 leaves it to w1
        script.events["answer"].set()
        assert await visit == {run_id: "waiting"}        # w1 let it go to its retry wait, the request unheard
        other.cancel_requested(run_id)       # heard again (as after a reconnect): no one holds it now
        return await settled(other)

    assert aio(go()) == "cancelled"
    assert other.metrics["run.cancelled"] == 1
    run = aio(run_row(store, run_id))
    assert (run["error_code"], run["error_message"], run["next_wake_at"]) == ("E_RUN_CANCELLED", "cancelled by ana: stop",
                                                                               None)
    clock.advance(60)
    assert aio(holder.drive()) == {} and script.called("a") == 1
