"""`since: lastSuccess` ranges on real PostgreSQL (docs/partitions.md, "Every day since the last success"): a daily
run plans the days its step has not processed yet, from `initial` on, up to the day before its logical date; the
plan is recorded at the step's first visit and read back by every later visit and replay; a failed day stays in
the following runs' plans; two runs of the workflow never take the same day."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from anthares44.automation.app.automation import Automation
from anthares44.automation.app.replay import replay
from tests.partitions.support import DailyApi, PROJECT, compile_yaml, drive_until_final, partitions_of, publish
from tests.runtime.engine_support import engine

UTC = timezone.utc


def since_yaml(base: str, *, initial: str = "2026-07-01", max_: int = 31, extra: str = "") -> str:
    return f"""\
name: daily-since
version: 1
{extra}steps:
  - id: load
    uses: http
    timeout: 500ms
    url: "{base}/day/{{{{ partition }}}}"
    partitions:
      range: {{since: lastSuccess, initial: "{initial}", to: "run.yesterday", every: 1d, max: {max_}}}
    onPartitionFailure: partial
"""


async def _plan(store, run_id) -> list[str]:
    return (await store.fetchrow("partition_plans_of_run", run_id=run_id))["keys"]


async def _run_on(store, clock, eng, ir, day: datetime, key: str):
    clock.set(day)
    run_id = (await store.create_run(PROJECT, ir.workflow_id, {}, key)).run_id
    return run_id, await drive_until_final(eng, clock, store, run_id)


def test_each_daily_run_plans_the_days_not_processed_yet(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    ir = compile_yaml(tmp_path, since_yaml(serve(api.app())))

    async def body():
        await publish(store, ir)
        eng = engine(store, clock=clock)
        r1, run = await _run_on(store, clock, eng, ir, datetime(2026, 7, 4, 6, tzinfo=UTC), "d4")
        assert run["state"] == "succeeded"
        assert await _plan(store, r1) == ["2026-07-01", "2026-07-02", "2026-07-03"]     # initial .. yesterday
        r2, run = await _run_on(store, clock, eng, ir, datetime(2026, 7, 5, 6, tzinfo=UTC), "d5")
        assert run["state"] == "succeeded" and await _plan(store, r2) == ["2026-07-04"]    # exactly the new day
        r3, run = await _run_on(store, clock, eng, ir, datetime(2026, 7, 5, 9, tzinfo=UTC), "d5-again")
        assert run["state"] == "succeeded" and await _plan(store, r3) == []                # nothing left today
        assert api.calls == {"2026-07-01": 1, "2026-07-02": 1, "2026-07-03": 1, "2026-07-04": 1}
        await eng.registry.aclose()
    aio(body())


def test_a_failed_day_stays_in_the_next_plans_until_it_is_processed(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    api.reject = {"2026-07-02"}
    ir = compile_yaml(tmp_path, since_yaml(serve(api.app())))

    async def body():
        await publish(store, ir)
        eng = engine(store, clock=clock)
        r1, run = await _run_on(store, clock, eng, ir, datetime(2026, 7, 4, 6, tzinfo=UTC), "d4")
        assert run["state"] == "partial"
        r2, run = await _run_on(store, clock, eng, ir, datetime(2026, 7, 5, 6, tzinfo=UTC), "d5")
        assert run["state"] == "partial" and await _plan(store, r2) == ["2026-07-02", "2026-07-04"]
        api.reject = set()                       # the far side is fixed
        r3, run = await _run_on(store, clock, eng, ir, datetime(2026, 7, 6, 6, tzinfo=UTC), "d6")
        assert run["state"] == "succeeded" and await _plan(store, r3) == ["2026-07-02", "2026-07-05"]
        r4, run = await _run_on(store, clock, eng, ir, datetime(2026, 7, 7, 6, tzinfo=UTC), "d7")
        assert await _plan(store, r4) == ["2026-07-06"]
        assert api.calls["2026-07-02"] == 3 and api.calls["2026-07-01"] == 1
        await eng.registry.aclose()
    aio(body())
