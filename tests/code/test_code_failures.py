"""How a workflow written in Python ends when something other than a step's call goes wrong: the function raises,
returns what is not JSON, its source changed after publishing, it passes its `timeout=`, a person cancels it
between two steps, its worker loses the lease while a step runs, or a compensation returns what is not JSON."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from anthares44.automation.clock import VirtualClock
from anthares44.automation.runtime.engine.cancels import cancel
from anthares44.automation.sdk.loader import import_path
from tests.code.support import published_code
from tests.runtime.engine_support import PROJECT, attempts, engine, state_changes

RAISES = '''from anthares44.automation import workflow, step


@workflow("raises", version=1)
async def raises(ctx, input):
    await step.run("a", fn=lambda: {"id": "A"})
    raise ValueError("no tenant named " + input["name"])
'''


def test_a_workflow_function_that_raises_fails_the_run_with_its_exception(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "raises.py", RAISES)
        run_id = (await auto.run("raises", {"name": "acme"}, "r1")).run_id
        assert await engine(store, clock=clock).drive() == {run_id: "failed"}
        run = await store.get_run(run_id)
        assert run["error_code"] == "E_CODE_WORKFLOW" and run["failed_step"] is None
        assert run["error_message"] == "workflow raises raised ValueError: no tenant named acme"
        assert await attempts(store, run_id) == [("a", "action", 1, "succeeded", None)]
    aio(body())


NOT_JSON = '''from anthares44.automation import workflow, step


@workflow("not-json", version=1)
async def not_json(ctx, input):
    await step.run("a", fn=lambda: {"id": "A"})
    return {"ids": {"A", "B"}}
'''


def test_a_result_that_is_not_json_fails_the_run(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "not_json.py", NOT_JSON)
        run_id = (await auto.run("not-json", {}, "j1")).run_id
        assert await engine(store, clock=clock).drive() == {run_id: "failed"}
        run = await store.get_run(run_id)
        assert run["error_code"] == "E_CODE_WORKFLOW" and run["result"] is None
        # Execution.run encodes the result, so the failure reads as the function's own
        assert run["error_message"] == "workflow not-json raised TypeError: set is not JSON-serialisable"
    aio(body())


def test_a_run_whose_source_changed_after_publishing_fails_unavailable(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "edited.py", RAISES.replace('"raises"', '"edited"'))
        run_id = (await auto.run("edited", {"name": "acme"}, "e1")).run_id
        # an edit in place of the deployed module, not published as a new version
        (tmp_path / "edited.py").write_text(RAISES.replace('"raises"', '"edited"').replace("no tenant", "no such"))
        assert await engine(store, clock=clock).drive() == {run_id: "failed"}
        run = await store.get_run(run_id)
        assert run["error_code"] == "E_CODE_UNAVAILABLE" and "changed since wf_edited v1" in run["error_message"]
        assert await attempts(store, run_id) == []            # nothing of the edited code ran
    aio(body())


PAST_TIMEOUT = '''from anthares44.automation import workflow, step


@workflow("slow-onboard", version=1, timeout="1h")
async def slow(ctx, input):
    await step.run("a", fn=lambda: {"id": "A"})
    await step.sleep("nap", "50m")      # fits the hour (a sleep past it fails at once, §19); the clock then
    await step.run("b", fn=lambda: {"id": "B"})   # jumps past the deadline before the run wakes
'''


def test_a_run_past_its_timeout_fails_its_next_step_with_E_RUN_DEADLINE(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "slow_onboard.py", PAST_TIMEOUT)
        run_id = (await auto.run("slow-onboard", {}, "t1")).run_id
        eng = engine(store, clock=clock)
        assert await eng.drive() == {run_id: "sleeping"}
        clock.advance(timedelta(hours=2))
        assert await eng.drive() == {run_id: "failed"}
        run = await store.get_run(run_id)
        assert (run["error_code"], run["failed_step"]) == ("E_RUN_DEADLINE", "b")
        assert (await attempts(store, run_id))[-1] == ("b", "action", 1, "failed", "E_RUN_DEADLINE")
    aio(body())


HALTS = '''from anthares44.automation import workflow, step

HOOK = {}
CALLED = []


async def a():
    await HOOK["during_a"]()
    return {"id": "A"}


@workflow("halts", version=1)
async def halts(ctx, input):
    await step.run("a", fn=a, compensate=lambda: CALLED.append("undo-a"))
    await step.run("b", fn=lambda: CALLED.append("b"))
'''


def test_a_code_run_cancelled_during_a_step_stops_before_the_next_one(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "halts.py", HALTS)
        run_id = (await auto.run("halts", {}, "h1")).run_id
        eng = engine(store, clock=clock)
        mod = import_path(tmp_path / "halts.py")

        async def cancel_now():      # as `runs cancel` and the daemon's NOTIFY a44_run_cancel would
            out = await cancel(store, PROJECT, run_id, by="ana", reason="wrong tenant")
            assert (out["outcome"], out["state"]) == ("requested", "running")
            eng.cancel_requested(run_id)
        mod.HOOK["during_a"] = cancel_now
        assert await eng.drive() == {run_id: "cancelled"}
        assert mod.CALLED == []                                 # b never started; no compensation was asked
        assert await attempts(store, run_id) == [("a", "action", 1, "succeeded", None)]
        run = await store.get_run(run_id)
        assert (run["error_code"], run["error_message"]) == ("E_RUN_CANCELLED", "cancelled by ana: wrong tenant")
        assert (await state_changes(store, run_id))[-1] == ("running", "cancelled")
    aio(body())


def test_a_code_worker_that_lost_its_lease_records_nothing_more(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "zombie.py", HALTS.replace('"halts"', '"zombie"'))
        run_id = (await auto.run("zombie", {}, "z1")).run_id
        mod = import_path(tmp_path / "zombie.py")
        go, started = asyncio.Event(), asyncio.Event()

        async def first_call_stalls():
            if not started.is_set():
                started.set()
                await go.wait()
        mod.HOOK["during_a"] = first_call_stalls
        # a stalled process: its clock, and so its lease renewal, stands still while the world's moves
        zombie = engine(store, clock=VirtualClock(clock.now()), worker_id="zombie")
        other = engine(store, clock=clock, worker_id="other")
        z = asyncio.create_task(zombie.run_once())
        await started.wait()
        clock.advance(31)
        assert await other.drive() == {run_id: "succeeded"}
        go.set()                                 # the zombie's step returns now, its lease long gone
        assert await z == {run_id: "lost"}
        assert zombie.metrics["lease.lost"] == 1
        assert [a[3] for a in await attempts(store, run_id) if a[0] == "a"] == ["lease_expired", "succeeded"]
        assert mod.CALLED == ["b"]
        assert (await store.get_run(run_id))["state"] == "succeeded"
    aio(body())


UNDO_NOT_JSON = '''from anthares44.automation import workflow, step


@workflow("undo-not-json", version=1)
async def undo_not_json(ctx, input):
    await step.run("a", fn=lambda: {"id": "A"}, compensate=lambda: {"undone": {"A"}})
    await step.run("b", fn=lambda: 1 / 0)
'''


def test_a_compensation_returning_what_is_not_json_still_counts_as_compensated(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "undo_not_json.py", UNDO_NOT_JSON)
        run_id = (await auto.run("undo-not-json", {}, "u1")).run_id
        eng = engine(store, clock=clock)
        assert await eng.drive() == {run_id: "compensating"}
        clock.advance(5)
        assert await eng.drive() == {run_id: "failed"}
        comp = [a for a in await store.list_attempts(run_id) if a["kind"] == "compensation"]
        assert [(a["step_id"], a["status"]) for a in comp] == [("a", "compensated")]
        assert store.load_result(comp[0]) is None
        assert (await store.get_run(run_id))["failed_step"] == "b"
    aio(body())


NUL_STEP = '''from anthares44.automation import workflow, step


@workflow("nul-step", version=1)
async def nul_step(ctx, input):
    await step.run("a", fn=lambda: {"name": "tenant\\x00acme"}, retry={"max": 3, "strategy": "fixed"})
'''


def test_a_step_result_postgresql_cannot_store_fails_the_step_not_every_visit(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "nul_step.py", NUL_STEP)
        run_id = (await auto.run("nul-step", {}, "n1")).run_id
        assert await engine(store, clock=clock).drive() == {run_id: "failed"}
        run = await store.get_run(run_id)
        assert (run["failed_step"], run["error_code"]) == ("a", "E_CONNECTOR_FAILED")
        assert "U+0000" in run["error_message"]
        assert await attempts(store, run_id) == [("a", "action", 1, "failed", "E_CONNECTOR_FAILED")]
    aio(body())
