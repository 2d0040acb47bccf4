"""One clock (issue 27): the daemon loops of `serve()` (the one place that composes them) wait for their instants on
the injected clock's alarms, so moving a VirtualClock (the `clock` fixture) drives the real engine in process on
the test database: a retry due in an hour, a daily schedule and an alert round come when the clock is moved that
far, without a wall-clock wait of that size (the wall-time re-checks are made far longer than the test's bounds)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta

from anthares44.automation.app.serve import ServeSettings, serve
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.alerts.evaluator import Evaluator
from anthares44.automation.runtime.engine import WorkerSettings
from anthares44.automation.runtime.scheduling import scheduler as scheduler_mod
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.scheduling.support import add_trigger, schedule_ir

from .engine_support import PROJECT, Script, node, workflow

T0 = datetime(2026, 3, 7, 12, 0, 30, tzinfo=UTC)
HOUR = timedelta(hours=1)
LONG = timedelta(hours=6)        # every wall-time re-check: the test passes only if the clock's alarms wake the loops


async def _until(probe, what: str, tries: int = 1500):
    """Poll `probe` (loopback, on the wall clock) until it is truthy; a loaded box may need a few seconds."""
    for _ in range(tries):
        got = await probe()
        if got:
            return got
        await asyncio.sleep(0.02)
    raise AssertionError(f"never: {what}")


@contextlib.asynccontextmanager
async def _serving(store, clock, registry=None):
    stop = asyncio.Event()
    task = asyncio.create_task(serve(ServeSettings(WorkerSettings(worker_id="d1", concurrency=4, lease_timeout=LONG)),
                                     stop, store=store, clock=clock, registry=registry))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def test_a_retry_due_in_an_hour_runs_when_the_clock_moves_an_hour(aio, store, clock):
    clock.set(T0)
    script = Script(plan={"call": ["retry", "ok"]})
    registry = ConnectorRegistry()
    registry.register(script)
    ir = workflow([node("call", retry=(1, "fixed"), base_ms=3_600_000)], name="later")

    async def scenario():
        await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        run_id = (await store.create_run(PROJECT, ir.workflow_id, {}, "k1")).run_id

        async def run():
            return await store.get_run(run_id)

        async with _serving(store, clock, registry):
            due = (await _until(lambda: _waiting_retry(run), "the first attempt fails and waits"))["next_wake_at"]
            assert due == T0 + HOUR
            clock.advance(HOUR - timedelta(seconds=1))
            await asyncio.sleep(0.2)
            assert (await run())["state"] != "succeeded" and len(script.calls) == 1
            clock.advance(timedelta(seconds=1))
            done = await _until(lambda: _finished(run), "the retry runs once the clock reaches it")
        assert done["state"] == "succeeded" and [c[2] for c in script.calls] == [1, 2]

    aio(scenario())


async def _waiting_retry(run):
    r = await run()
    return r if r["next_wake_at"] is not None and r["next_wake_at"] > T0 and r["lease_owner"] is None else None


async def _finished(run):
    r = await run()
    return r if r["state"] in ("succeeded", "failed") else None


def test_a_daily_schedule_fires_when_the_clock_moves_a_day(aio, store, clock, monkeypatch):
    monkeypatch.setattr(scheduler_mod, "DEFAULT_POLL", LONG)
    clock.set(T0.replace(hour=3))      # a day later is 30 s after a firing: on time, within the misfire grace
    ir = workflow([node("nap", sleep_ms=3_600_000)], name="nightly")
    trig = schedule_ir("trg_daily", "0 3 * * *", overlap="allow").model_copy(update={"workflow_id": ir.workflow_id})

    async def runs() -> list[str]:
        async with store.connection("t") as conn:
            return [r[0] for r in await conn.fetch(
                "select idempotency_key from automation.runs where trigger_id = 'trg_daily' order by 1")]

    async def scenario():
        await store.publish_version(PROJECT, ir.workflow_id, 1, ir.sha256, to_json(ir))
        await add_trigger(store, trig, clock.now())
        async with _serving(store, clock):
            await _until(lambda: _heartbeat(store), "the daemon serves")
            assert await runs() == []
            clock.advance(timedelta(days=1))
            first = await _until(runs, "the 03:00 firing starts a run")
            # by now the scheduler sleeps until tomorrow's 03:00 (its wall-time poll is hours away): only the
            # clock's alarm can wake it
            clock.advance(timedelta(days=1))
            both = await _until(lambda: _more(runs, 1), "the next day's firing starts a second run")
        assert first == ["trg_daily:2026-03-08T03:00:00+00:00"]
        assert both == first + ["trg_daily:2026-03-09T03:00:00+00:00"]

    aio(scenario())


async def _heartbeat(store):
    async with store.connection("t") as conn:
        return await conn.fetchval("select count(*) from automation.daemons")


async def _more(probe, n: int):
    got = await probe()
    return got if len(got) > n else None


def test_alert_rounds_follow_the_clock(aio, store, clock):
    clock.set(T0)
    ev = Evaluator(store, holder="d1", interval_s=600, clock=clock)     # 10 min: far beyond the wall bounds

    async def lease_until():
        async with store.connection("t") as conn:
            return await conn.fetchval("select max(expires_at) from automation.alert_evaluator")

    async def scenario():
        stop = asyncio.Event()
        task = asyncio.create_task(ev.serve(stop))
        try:
            first = await _until(lease_until, "the first round claims the evaluator's lease")
            await asyncio.sleep(0.2)
            assert await lease_until() == first      # no second round while the clock stands still
            clock.advance(600)
            second = await _until(lambda: _later(lease_until, first), "a round 10 min of the clock later")
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
        assert second - first == timedelta(seconds=600)

    aio(scenario())


async def _later(probe, than):
    got = await probe()
    return got if got is not None and got > than else None
