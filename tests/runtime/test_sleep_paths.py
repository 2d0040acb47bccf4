"""Two paths of the sleep step (runtime/engine/sleeps.py) beside tests/runtime/test_timers.py: a sleep opened before
migration 0034 stored due instants (its attempt's due_at is NULL) ends at its start plus its duration, and a
templated `until` that cannot be rendered fails its step with E_SLEEP_INVALID. Real PostgreSQL, a VirtualClock."""

from __future__ import annotations

from datetime import timedelta

from tests.partitions.support import compile_yaml, publish
from tests.runtime.engine_support import engine, node, publish_and_run, run_row, workflow

from .test_timers import due_now, sleep_attempts, start

UNRENDERABLE = """\
name: launch
version: 1
steps:
  - id: launch
    sleep: {until: "{{ input.plan.launchAt }}"}
"""


def test_a_sleep_opened_before_due_instants_were_stored_ends_at_its_start_plus_its_duration(store, clock, aio):
    ir = workflow([node("nap", sleep_ms=60_000), node("b", uses="pass", params={"output": 1})])
    run_id = aio(publish_and_run(store, ir))
    assert aio(engine(store, clock=clock).drive()) == {run_id: "sleeping"}
    (a,) = aio(sleep_attempts(store, run_id, "nap"))
    end = a["started_at"] + timedelta(minutes=1)

    async def as_before_0034():
        async with store.connection("test_legacy_sleep") as conn:
            await conn.execute("update automation.step_attempts set due_at = null where run_id = $1", run_id)
    aio(as_before_0034())
    clock.advance(30)
    aio(due_now(store, run_id))          # a look half-way: it sleeps on until the end computed from its start
    assert aio(engine(store, clock=clock).drive()) == {run_id: "sleeping"}
    assert aio(run_row(store, run_id))["next_wake_at"] == end
    clock.set(end)
    assert aio(engine(store, clock=clock).drive()) == {run_id: "succeeded"}
    assert [x["status"] for x in aio(sleep_attempts(store, run_id, "nap"))] == ["succeeded"]


def test_an_until_that_cannot_be_rendered_fails_its_step_with_E_SLEEP_INVALID(store, clock, aio, tmp_path):
    ir = compile_yaml(tmp_path, UNRENDERABLE)
    aio(publish(store, ir))
    run_id = aio(start(store, ir, input={"plan": "not an object"}))
    assert aio(engine(store, clock=clock).drive()) == {run_id: "failed"}
    run = aio(run_row(store, run_id))
    assert (run["error_code"], run["failed_step"]) == ("E_SLEEP_INVALID", "launch")
    assert run["error_message"].startswith("sleep launch: `until` could not be rendered: template")
    assert [a["status"] for a in aio(sleep_attempts(store, run_id, "launch"))] == ["failed"]
