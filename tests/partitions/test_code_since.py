"""`ctx.partitions.since_last_success` in a code workflow (the twin of a YAML `since: lastSuccess` range): the plan
is the recorded step `<name>.plan`, decided at the first visit and returned from the log by every later one; a
daily run plans the days not processed yet; a failed day stays in the next run's plan."""

from __future__ import annotations

from datetime import UTC, datetime

from anthares44.automation.app.automation import Automation
from tests.partitions.support import ThreadedDailyApi, drive_until_final
from tests.runtime.engine_support import engine

UTC = UTC
MODULE = '''
import json
import urllib.error
import urllib.request

from anthares44.automation import step, workflow
from anthares44.automation.errors import A44Error


def fetch(base, day):
    try:
        with urllib.request.urlopen(f"{base}/day/{day}", timeout=5) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise A44Error(f"E_UPSTREAM_{exc.code}", f"{day}: HTTP {exc.code}") from None


@workflow("daily-since-code", version=1)
async def daily(ctx, input):
    days = await ctx.partitions.since_last_success("load-day", every="1d", initial="2026-07-01")
    got = await step.map("load-day", days, lambda day: fetch(input["baseUrl"], day), timeout="5s",
                         retry={"max": 1, "strategy": "fixed", "base": "10s"}, on_failure="partial")
    return {"days": days, "loaded": [g["day"] for g in got if g]}
'''


def test_code_runs_plan_the_days_not_processed_yet_once_per_run(store, clock, aio, tmp_path):
    api = ThreadedDailyApi()
    api.reject, api.flaky = {"2026-07-02"}, {"2026-07-03"}
    (tmp_path / "daily_since_code.py").write_text(MODULE)

    async def body():
        auto = Automation(store)
        assert (await auto.publish([str(tmp_path / "daily_since_code.py")])).ok
        eng = engine(store, clock=clock)

        async def run_on(day: datetime, key: str) -> tuple[str, dict]:
            clock.set(day)
            run_id = (await auto.run("daily-since-code", {"baseUrl": api.url}, key)).run_id
            run = await drive_until_final(eng, clock, store, run_id, rounds=30)
            plans = [a for a in await store.list_attempts(run_id) if a["step_id"] == "load-day.plan"]
            assert len(plans) == 1                     # decided once, read back by the visit after the retry wait
            return run_id, run

        r1, run = await run_on(datetime(2026, 7, 4, 6, tzinfo=UTC), "d4")
        assert run["state"] == "partial" and run["result"]["days"] == ["2026-07-01", "2026-07-02", "2026-07-03"]
        assert api.calls["2026-07-03"] == 2            # flaky: retried after 10 s on a later visit
        api.reject = set()
        r2, run = await run_on(datetime(2026, 7, 5, 6, tzinfo=UTC), "d5")
        assert run["state"] == "succeeded" and run["result"]["days"] == ["2026-07-02", "2026-07-04"]
        r3, run = await run_on(datetime(2026, 7, 6, 6, tzinfo=UTC), "d6")
        assert run["result"]["days"] == ["2026-07-05"]
        parts = await store.fetch("partition_list", project="pj_default", run_id=r3, workflow=None, state=None,
                                  partition=None, step=None, limit=10)
        assert [(p["step_id"], p["partition"], p["state"]) for p in parts] == [("load-day", "2026-07-05", "success")]
        await eng.registry.aclose()
    aio(body())


TOO_MANY = '''
from anthares44.automation import step, workflow


@workflow("since-too-many", version=1)
async def too_many(ctx, input):
    days = await ctx.partitions.since_last_success("load-day", every="1d", initial="2026-06-01", max=5)
    return await step.map("load-day", days, lambda day: {"day": day})
'''


def test_a_code_plan_over_its_max_fails_its_plan_step_before_any_day_runs(store, clock, aio, tmp_path):
    (tmp_path / "since_too_many.py").write_text(TOO_MANY)

    async def body():
        auto = Automation(store)
        assert (await auto.publish([str(tmp_path / "since_too_many.py")])).ok
        clock.set(datetime(2026, 7, 4, 6, tzinfo=UTC))
        run_id = (await auto.run("since-too-many", {}, "m1")).run_id
        run = await drive_until_final(engine(store, clock=clock), clock, store, run_id)
        assert (run["state"], run["failed_step"], run["error_code"]) == ("failed", "load-day.plan",
                                                                          "E_PARTITIONS_INVALID")
        assert "would plan 33 partitions from 2026-06-01 to 2026-07-03, more than its max 5" in run["error_message"]
        assert [(a["step_id"], a["status"]) for a in await store.list_attempts(run_id)] == [("load-day.plan",
                                                                                            "failed")]
    aio(body())
