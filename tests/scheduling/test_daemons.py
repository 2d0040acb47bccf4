"""Two `serve()` processes (in-process, each with its own pool, its daemon and its scheduler task) on one database
and one ManualClock: each occurrence starts exactly one run."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from anthares44.automation.app.serve import ServeSettings, serve
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.engine import WorkerSettings
from anthares44.automation.runtime.scheduling import scheduler as scheduler_mod
from anthares44.automation.runtime.store.core import Store
from tests.runtime.engine_support import node, workflow

from .support import PROJECT, add_trigger, schedule_ir

UTC = UTC
T0 = datetime(2026, 3, 7, 12, 0, 30, tzinfo=UTC)


def test_two_daemons_start_each_occurrence_once(aio, store, clock, pg_url, tmp_path, monkeypatch):
    monkeypatch.setattr(scheduler_mod, "DEFAULT_POLL", timedelta(milliseconds=50))
    clock.set(T0)
    ir = workflow([node("nap", sleep_ms=3_600_000)], name="nightly")   # runs stay asleep: overlap matters
    aio(store.publish_version(PROJECT, ir.workflow_id, 1, ir.sha256, to_json(ir)))
    aio(add_trigger(store, schedule_ir("trg_d_allow", "* * * * *", overlap="allow"), T0))
    aio(add_trigger(store, schedule_ir("trg_d_skip", "* * * * *", overlap="skip"), T0))

    async def count(where: str) -> int:
        async with store.connection("t") as conn:
            return await conn.fetchval(f"select count(*) from automation.schedule_occurrences where {where}")

    async def scenario():
        stores = [await Store.connect(pg_url, clock=clock, results_dir=tmp_path / f"r{i}") for i in range(2)]
        stops = [asyncio.Event() for _ in stores]
        tasks = [asyncio.create_task(serve(ServeSettings(WorkerSettings(worker_id=f"d{i}", concurrency=4)), stop,
                                           store=s, clock=clock))
                 for i, (s, stop) in enumerate(zip(stores, stops))]
        try:
            for minute in range(1, 7):
                clock.set(T0.replace(second=0) + timedelta(minutes=minute, seconds=1))
                # settled = decided, and a started occurrence has its run linked (the scheduler links it right after
                # its insert commits: stopping between the two would leave the link to the 30 s repair)
                settled = "status <> 'started' or run_id is not null"
                for _ in range(1000):   # both see the new minute within ~50 ms; a loaded CI box may need seconds
                    if await count(settled) == 2 * minute:
                        break
                    await asyncio.sleep(0.02)
                assert await count("true") == await count(settled) == 2 * minute
        finally:
            for stop in stops:
                stop.set()
            await asyncio.gather(*tasks)
            for s in stores:
                await s.close()

    aio(scenario())
    assert aio(count("trigger_id = 'trg_d_allow' and status = 'started' and run_id is not null")) == 6
    # the first skip run sleeps for an hour: every later minute is skipped_overlap
    assert aio(count("trigger_id = 'trg_d_skip' and status = 'started'")) == 1
    assert aio(count("trigger_id = 'trg_d_skip' and status = 'skipped_overlap'")) == 5

    async def runs():
        async with store.connection("t") as conn:
            return await conn.fetchrow("select count(*) as n, count(distinct idempotency_key) as keys "
                                       "from automation.runs")
    r = aio(runs())
    assert r["n"] == r["keys"] == 7
