"""Workflows in code (§12) in queues behave like YAML runs (docs/queues.md): a failed code run is redelivered
while its queue's maxAttempts allows, then dead-lettered with its history; when a code run of a by-partition queue
ends, its successor is due at once (no 60 s park re-check) and the daemons are told (NOTIFY a44_runs_due)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from anthares44.automation.app.automation import Automation
from anthares44.automation.compiler.models.queues import Queue
from anthares44.automation.runtime import queues as rq
from tests.runtime.engine_support import PROJECT, engine

ALWAYS_FAILS = '''from anthares44.automation import workflow, step

calls = []


@workflow("always-fails", version=1)
async def always_fails(ctx, input):
    await step.run("prepare", fn=lambda: {"ok": True})
    await step.run("charge", fn=_boom, retry={"max": 0, "strategy": "none"})
    return {"never": True}


async def _boom():
    calls.append("charge")
    raise ConnectionError("payments gateway unreachable")     # transient: the message is worth delivering again
'''

DECLINED = ALWAYS_FAILS.replace("always-fails", "declined").replace(
    'raise ConnectionError("payments gateway unreachable")     # transient: the message is worth delivering again',
    'raise ValueError("card declined")                          # permanent: delivering it again changes nothing')

SUCCEEDS = '''from anthares44.automation import workflow, step


@workflow("in-order", version=1)
async def in_order(ctx, input):
    return await step.run("only", fn=lambda: {"n": input["n"]})
'''


async def _publish(store, tmp_path, name: str, src: str, queue: Queue) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    await rq.store_queues(store, PROJECT, [queue])
    report = await Automation(store).publish([str(path)])
    assert report.ok, report
    return report.workflows[0].workflow_id


def test_a_permanent_failure_is_dead_lettered_at_once(store, clock, aio, tmp_path):
    async def body():
        wf = await _publish(store, tmp_path, "declined", DECLINED, Queue(id="q_code", maxAttempts=5))
        await store.create_run(PROJECT, wf, {"card": "4242"}, "msg-2", queue="q_code")
        await engine(store, clock=clock).drive()
        async with store.connection("t") as c:
            runs = await c.fetch("select state, delivery from automation.runs")
        assert [(r["state"], r["delivery"]) for r in runs] == [("failed", 1)]      # never delivered again
        (row,) = await store.fetch("dlq_list", project=PROJECT, queue=None, limit=10)
        dl = await rq.dlq_show(store, PROJECT, row["dead_letter_id"])
        assert (dl["error_code"], dl["attempts"]) == ("E_CONNECTOR_FAILED", 1)
    aio(body())


def test_failing_code_run_is_redelivered_then_dead_lettered(store, clock, aio, tmp_path):
    async def body():
        wf = await _publish(store, tmp_path, "always_fails", ALWAYS_FAILS, Queue(id="q_code", maxAttempts=2))
        run = await store.create_run(PROJECT, wf, {"card": "4242"}, "msg-1", queue="q_code")
        await engine(store, clock=clock).drive()
        async with store.connection("t") as c:
            runs = await c.fetch("select run_id, state, delivery, origin_run_id, error_code, failed_step "
                                 "from automation.runs order by delivery")
        # delivery 1 failed and was redelivered once (same input, origin = delivery 1); delivery 2 failed too
        assert [(r["state"], r["delivery"]) for r in runs] == [("failed", 1), ("failed", 2)]
        assert runs[0]["run_id"] == run.run_id and runs[1]["origin_run_id"] == run.run_id
        assert {r["failed_step"] for r in runs} == {"charge"}
        from anthares44.automation.sdk.loader import import_path
        assert import_path(tmp_path / "always_fails.py").calls == ["charge", "charge"]
        rows = await store.fetch("dlq_list", project=PROJECT, queue=None, limit=10)
        assert len(rows) == 1
        dl = await rq.dlq_show(store, PROJECT, rows[0]["dead_letter_id"], with_attempts=True)
        assert dl["error_code"] == "E_NETWORK" and dl["attempts"] == 2
        assert dl["last_error"]["step"] == "charge" and "unreachable" in dl["last_error"]["message"]
        assert [d["delivery"] for d in dl["history"]] == [1, 2]
        assert [d["run_id"] for d in dl["history"]] == [r["run_id"] for r in runs]
        for d in dl["history"]:
            # (the ManualClock stands still: both attempts share started_at, so compare without order)
            assert sorted((a["step_id"], a["status"]) for a in d["attempts"]) == [("charge", "failed"),
                                                                                 ("prepare", "succeeded")]
        assert await engine(store, clock=clock).drive() == {}       # nothing left: it stays in the DLQ
    aio(body())


def test_code_run_wakes_its_partition_successor_at_once(store, clock, aio, tmp_path):
    async def body():
        wf = await _publish(store, tmp_path, "in_order", SUCCEEDS,
                            Queue(id="q_seq", ordering="by-partition", maxAttempts=1))
        first = await store.create_run(PROJECT, wf, {"n": 1}, "m-1", queue="q_seq", partition_key="acct-1")
        second = await store.create_run(PROJECT, wf, {"n": 2}, "m-2", queue="q_seq", partition_key="acct-1")
        due: list[datetime] = []
        async with store.connection("listen") as listen:
            def on_due(conn, pid, channel, payload):
                due.append(datetime.fromtimestamp(int(payload) / 1000, UTC))

            await listen.add_listener("a44_runs_due", on_due)
            eng = engine(store, clock=clock)
            rows = await eng.claim()
            assert [r["run_id"] for r in rows] == [first.run_id]     # the head only; the second is parked
            parked = await store.get_run(second.run_id)
            assert parked["state"] == "pending" and parked["next_wake_at"] > clock.now()
            assert await eng.drive_run(rows[0]) == "succeeded"
            await eng.notifier.drain()
            # the clock has not moved: the successor is due now and claimable at this very instant
            nxt = await store.get_run(second.run_id)
            assert nxt["state"] == "pending" and nxt["next_wake_at"] <= clock.now()
            for _ in range(100):
                if due:
                    break
                await asyncio.sleep(0.01)
            assert due and min(due) <= clock.now()       # the daemons were told it is due (no timer needed)
            rows = await eng.claim()
            assert [r["run_id"] for r in rows] == [second.run_id]
            assert await eng.drive_run(rows[0]) == "succeeded"
            await listen.remove_listener("a44_runs_due", on_due)
    aio(body())
