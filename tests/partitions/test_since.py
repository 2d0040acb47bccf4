"""`since: lastSuccess` ranges on real PostgreSQL (docs/partitions.md, "Every day since the last success"): a daily
run plans the days its step has not processed yet, from `initial` on, up to the day before its logical date; the
plan is recorded at the step's first visit and read back by every later visit and replay; a failed day stays in
the following runs' plans; two runs of the workflow never take the same day."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from anthares44.automation.app.automation import Automation
from anthares44.automation.app.replay import replay
from tests.partitions.support import PROJECT, DailyApi, compile_yaml, drive_until_final, partitions_of, publish
from tests.runtime.engine_support import engine

UTC = UTC


def since_yaml(base: str, *, initial: str = "2026-07-01", max_: int = 31, extra: str = "",
               timeout: str = "500ms", concurrency: int = 4) -> str:
    return f"""\
name: daily-since
version: 1
{extra}steps:
  - id: load
    uses: http
    timeout: {timeout}
    url: "{base}/day/{{{{ partition }}}}"
    partitions:
      range: {{since: lastSuccess, initial: "{initial}", to: "run.yesterday", every: 1d, max: {max_}}}
      concurrency: {concurrency}
    onPartitionFailure: partial
"""


async def _plan(store, run_id) -> list[str]:
    return (await store.fetchrow("partition_plans_of_run", run_id=run_id))["keys"]


async def _run_on(store, clock, eng, ir, day: datetime, key: str):
    clock.set(day)
    run_id = (await store.create_run(PROJECT, ir.workflow_id, {}, key)).run_id
    return run_id, await drive_until_final(eng, clock, store, run_id)


class Days:
    """Runs of one published since workflow on an engine: `await days.on(4)` starts the run of 2026-07-04 06:00
    UTC, drives it to its end and gives (its state, its recorded plan); `days.run_id` is its id."""

    def __init__(self, store, clock, ir):
        self.store, self.clock, self.ir = store, clock, ir
        self.eng = engine(store, clock=clock)
        self.run_id = None

    async def on(self, day: int, hour: int = 6) -> tuple[str, list[str]]:
        self.run_id, run = await _run_on(self.store, self.clock, self.eng, self.ir,
                                         datetime(2026, 7, day, hour, tzinfo=UTC), f"d{day}-{hour}")
        return run["state"], await _plan(self.store, self.run_id)


@pytest.fixture
def daily(store, clock, aio, serve, tmp_path):
    """(the loopback daily API, Days of the since workflow over it)."""
    api = DailyApi()
    ir = compile_yaml(tmp_path, since_yaml(serve(api.app())))
    aio(publish(store, ir))
    days = Days(store, clock, ir)
    yield api, days
    aio(days.eng.registry.aclose())


def test_each_daily_run_plans_the_days_not_processed_yet(aio, daily):
    api, days = daily

    async def body():
        assert await days.on(4) == ("succeeded", ["2026-07-01", "2026-07-02", "2026-07-03"])  # initial .. yesterday
        assert await days.on(5) == ("succeeded", ["2026-07-04"])                              # exactly the new day
        assert await days.on(5, hour=9) == ("succeeded", [])                                  # nothing left today
        assert api.calls == {"2026-07-01": 1, "2026-07-02": 1, "2026-07-03": 1, "2026-07-04": 1}
    aio(body())


def test_a_failed_day_stays_in_the_next_plans_until_it_is_processed(aio, daily):
    api, days = daily
    api.reject = {"2026-07-02"}

    async def body():
        assert (await days.on(4))[0] == "partial"
        assert await days.on(5) == ("partial", ["2026-07-02", "2026-07-04"])
        api.reject = set()                       # the far side is fixed
        assert await days.on(6) == ("succeeded", ["2026-07-02", "2026-07-05"])
        assert await days.on(7) == ("succeeded", ["2026-07-06"])
        assert api.calls["2026-07-02"] == 3 and api.calls["2026-07-01"] == 1
    aio(body())


def test_a_day_a_person_skipped_is_not_planned_again(store, aio, daily):
    api, days = daily
    api.reject = {"2026-07-02"}

    async def body():
        assert (await days.on(4))[0] == "partial"
        await Automation(store).skip(days.run_id, partition="2026-07-02", reason="upstream dropped it", by="ana")
        assert await days.on(5) == ("succeeded", ["2026-07-04"])
        assert api.calls["2026-07-02"] == 1
    aio(body())


def test_a_replay_reads_the_recorded_plan_back_whatever_ran_since(store, clock, aio, serve, tmp_path):
    """The plan of a run is the run's: a later run processing its failed day, or a new version planning with
    another `initial`, changes nothing in a replay of it (the recorded keys are used, not re-evaluated)."""
    api = DailyApi()
    api.reject = {"2026-07-02"}
    base = serve(api.app())
    ir = compile_yaml(tmp_path, since_yaml(base))
    ir2 = compile_yaml(tmp_path, since_yaml(base, initial="2026-06-20").replace("version: 1", "version: 2"),
                       name="v2.yaml")

    async def body():
        await publish(store, ir)
        eng = engine(store, clock=clock)
        r1, run = await _run_on(store, clock, eng, ir, datetime(2026, 7, 4, 6, tzinfo=UTC), "d4")
        assert run["state"] == "partial"
        api.reject = set()
        r2, run = await _run_on(store, clock, eng, ir, datetime(2026, 7, 5, 6, tzinfo=UTC), "d5")
        assert run["state"] == "succeeded" and await _plan(store, r2) == ["2026-07-02", "2026-07-04"]
        await publish(store, ir2)
        calls = dict(api.calls)
        auto = Automation(store)
        await replay(auto, [r1], from_step="load", to_version=2)
        run = await drive_until_final(eng, clock, store, r1)
        assert (run["state"], run["epoch"], run["version"]) == ("succeeded", 1, 2)
        parts = await partitions_of(store, r1)
        assert [p["partition"] for p in parts] == ["2026-07-01", "2026-07-02", "2026-07-03"]
        assert {p["epoch"] for p in parts} == {1}
        assert {d: api.calls[d] - calls.get(d, 0) for d in api.calls if api.calls[d] > calls.get(d, 0)} == {
            "2026-07-01": 1, "2026-07-02": 1, "2026-07-03": 1}              # the recorded days, nothing else
        await eng.registry.aclose()
    aio(body())


def test_more_days_than_max_fails_the_step_with_E_PARTITIONS_INVALID(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    ir = compile_yaml(tmp_path, since_yaml(serve(api.app()), max_=5))

    async def body():
        await publish(store, ir)
        eng = engine(store, clock=clock)
        r1, run = await _run_on(store, clock, eng, ir, datetime(2026, 7, 10, 6, tzinfo=UTC), "d10")
        assert (run["state"], run["error_code"]) == ("failed", "E_PARTITIONS_INVALID")
        assert "9 partitions" in run["error_message"] and "max 5" in run["error_message"]
        assert not api.calls
        await eng.registry.aclose()
    aio(body())


def test_two_runs_planning_at_once_never_take_the_same_day(pg_url, store, clock, aio, serve, tmp_path):
    """Both runs' first visits compute the same days (each reads the history before either commits): the plan
    operation's lock and check refuse the second plan, whose run plans again without the first one's days. Two
    daemons (engines of one run each): within one engine both plans would go in one group-commit statement, where
    the second one sees the first and waits on no lock."""
    api = DailyApi()
    ir = compile_yaml(tmp_path, since_yaml(serve(api.app())))

    async def body():
        await publish(store, ir)
        eng = engine(store, clock=clock, worker_id="w1", concurrency=1)
        other = engine(store, clock=clock, worker_id="w2", concurrency=1)
        clock.set(datetime(2026, 7, 4, 6, tzinfo=UTC))
        runs = [(await store.create_run(PROJECT, ir.workflow_id, {}, f"k{i}")).run_id for i in range(2)]
        # hold the plan lock of (workflow, step) until both planners computed their keys and wait on it
        holder = await asyncpg.connect(pg_url)
        tx = holder.transaction()
        await tx.start()
        await holder.execute("select pg_advisory_xact_lock(hashtextextended($1, 0))",
                             f"a44.partition_plan/{PROJECT}/{ir.workflow_id}/load")
        driving = asyncio.gather(eng.drive(), other.drive())
        for _ in range(500):
            if await holder.fetchval("select count(*) from pg_locks where locktype = 'advisory' and not granted") == 2:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the two planners never waited on the plan lock")
        await tx.rollback()
        await driving
        await holder.close()
        for r in runs:
            await drive_until_final(eng, clock, store, r)
        assert eng.metrics["partitions.replanned"] + other.metrics["partitions.replanned"] == 1         # the second planner's first plan was refused
        plans = [await _plan(store, r) for r in runs]
        assert sorted(plans) == [[], ["2026-07-01", "2026-07-02", "2026-07-03"]]
        assert api.calls == {"2026-07-01": 1, "2026-07-02": 1, "2026-07-03": 1}
        await eng.registry.aclose()
        await other.registry.aclose()
    aio(body())


def test_a_run_leaves_out_the_days_an_unfinished_run_owns(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    api.hang = {"2026-07-02"}
    ir = compile_yaml(tmp_path, since_yaml(serve(api.app())))

    async def body():
        await publish(store, ir)
        first, second = engine(store, clock=clock), engine(store, clock=clock)
        clock.set(datetime(2026, 7, 4, 6, tzinfo=UTC))
        r1 = (await store.create_run(PROJECT, ir.workflow_id, {}, "k1")).run_id
        busy = asyncio.create_task(first.drive())
        for _ in range(500):                         # until r1 planned its days and is calling 07-02
            if api.in_flight:
                break
            await asyncio.sleep(0.01)
        clock.set(datetime(2026, 7, 5, 6, tzinfo=UTC))
        r2 = (await store.create_run(PROJECT, ir.workflow_id, {}, "k2")).run_id
        await drive_until_final(second, clock, store, r2)
        assert await _plan(store, r2) == ["2026-07-04"]            # 07-01..07-03 belong to r1
        await busy
        api.hang = set()
        run = await drive_until_final(first, clock, store, r1)
        assert await _plan(store, r1) == ["2026-07-01", "2026-07-02", "2026-07-03"] and run["state"] == "partial"
        for eng in (first, second):
            await eng.registry.aclose()
    aio(body())


def test_a_scheduled_run_plans_to_the_day_before_its_occurrence_in_the_workflow_zone(store, clock, aio, serve,
                                                                                       tmp_path):
    """`run.yesterday` is the day before the run's logical date: its schedule occurrence (22:00 on 07-04 in
    Sao Paulo, 01:00 on 07-05 in UTC), caught up the next afternoon, in the schedule's zone."""
    from anthares44.automation.runtime.scheduling import Scheduler
    from tests.scheduling.support import add_trigger

    api = DailyApi()
    trigger = 'trigger: {cron: "0 22 * * *", tz: America/Sao_Paulo, catchUp: {enabled: true}}\n'
    ir = compile_yaml(tmp_path, since_yaml(serve(api.app()), extra=trigger))

    async def body():
        clock.set(datetime(2026, 7, 4, 12, tzinfo=UTC))
        await publish(store, ir)
        await add_trigger(store, ir.triggers[0], clock.now())
        clock.set(datetime(2026, 7, 5, 20, tzinfo=UTC))          # 17:00 on 07-05 there: the 22:00 of 07-04 was missed
        rep = await Scheduler(store, clock=clock).tick()
        (run_id,) = rep.runs_created.values()
        eng = engine(store, clock=clock)
        run = await drive_until_final(eng, clock, store, run_id)
        assert run["state"] == "succeeded"
        assert await _plan(store, run_id) == ["2026-07-01", "2026-07-02", "2026-07-03"]
        await eng.registry.aclose()
    aio(body())


def test_the_recorded_plan_survives_a_kill_9_between_first_visit_and_completion(pg_url, tmp_path):
    """Real daemons on the system clock: the lease holder is killed with partitions in flight; the survivor
    finishes exactly the recorded days (the ones done before the kill are not called again)."""
    from tests.partitions.crash_support import SlowDays, kill_the_holder_mid_fan_out, setup_run
    from tests.runtime.pg import query

    far = SlowDays()
    today = datetime.now(UTC).date()
    want = [(today - timedelta(days=n)).isoformat() for n in range(6, 0, -1)]
    ir = compile_yaml(tmp_path, since_yaml(far.url, initial=want[0], timeout="10s", concurrency=2))
    run_id = asyncio.run(setup_run(pg_url, ir, tmp_path, {}))
    planned = []
    holder, _ = kill_the_holder_mid_fan_out(pg_url, tmp_path, far, run_id, done=2, before_kill=lambda: planned.extend(
        query(pg_url, "select keys from automation.partition_plans where run_id = $1", run_id)))
    assert [json.loads(r["keys"]) if isinstance(r["keys"], str) else r["keys"] for r in planned] == [want]
    parts = query(pg_url, "select partition, state from automation.run_partitions where run_id = $1 "
                          "order by ordinal", run_id)
    assert [(p["partition"], p["state"]) for p in parts] == [(d, "success") for d in want]
    assert set(far.calls) == set(want) and all(1 <= far.calls[d] <= 2 for d in want)
    done_by_holder = query(pg_url, "select step_id from automation.step_attempts where run_id = $1 and "
                                   "status = 'succeeded' and worker_id = $2 and step_id like 'load[%'", run_id, holder)
    assert done_by_holder and all(far.calls[r["step_id"][5:-1]] == 1 for r in done_by_holder)


def test_a_cel_range_sees_the_last_success_and_the_logical_date(store, clock, aio, serve, tmp_path):
    """`partitions.last_success` and `run.yesterday` in a plain `from` / `to` range: here, each run also loads
    the last day it loaded before (a one-day overlap)."""
    api = DailyApi()
    text = since_yaml(serve(api.app())).replace(
        'since: lastSuccess, initial: "2026-07-01", ',
        "from: \"partitions.last_success == null ? '2026-07-01' : partitions.last_success\", ").replace(
        ", max: 31", "")
    days = Days(store, clock, compile_yaml(tmp_path, text))

    async def body():
        await publish(store, days.ir)
        assert await days.on(4) == ("succeeded", ["2026-07-01", "2026-07-02", "2026-07-03"])
        assert await days.on(6) == ("succeeded", ["2026-07-03", "2026-07-04", "2026-07-05"])
        await days.eng.registry.aclose()
    aio(body())
