"""One run per partition (issue 25 item 5, docs/partitions.md "One run per partition"): runs of one workflow whose
partitions overlap, whatever the source of the keys, never process the same key at the same time. The loopback
export API logs every call's start and end with the run it came from (its Idempotency-Key); two engines (two
daemons' interpreters) drive the runs side by side on the same database. `onConflict: wait` (the default): every
run processes all its keys, one after the other on a shared key, the waiting run holding no worker; `skip`: a key
another run was processing is recorded skipped with that run's id, and that run did process it. A property test
draws random overlaps."""

from __future__ import annotations

import asyncio
import time
from datetime import date, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.partitions.support import PROJECT, DailyApi, compile_yaml, partitions_of, publish
from tests.runtime.engine_support import engine

FIRST = date(2026, 7, 1)


def overlap_yaml(base: str, name: str, on_conflict: str | None, concurrency: int = 3, source: str = "range") -> str:
    keys = ('range: {from: "input.from", to: "input.to", every: 1d}' if source == "range"
            else 'foreach: "input.days"')
    conflict = f"\n      onConflict: {on_conflict}" if on_conflict else ""
    return f"""\
name: {name}
version: 1
steps:
  - id: load
    uses: http
    timeout: 5s
    url: "{base}/day/{{{{ partition }}}}"
    partitions:
      {keys}
      concurrency: {concurrency}{conflict}
    onPartitionFailure: partial
"""


class LoggingApi(DailyApi):
    """DailyApi that takes `delay` seconds per call and logs (day, run, start, end) of each."""

    def __init__(self, delay: float = 0.03):
        super().__init__()
        self.delay = delay
        self.log: list[tuple[str, str, float, float]] = []

    def routes(self, app):
        from aiohttp import web

        async def day(request):
            d = request.match_info["day"]
            run = request.headers.get("Idempotency-Key", "").split(":")[0]
            start = time.monotonic()
            await asyncio.sleep(self.delay)
            self.log.append((d, run, start, time.monotonic()))
            return web.json_response({"day": d})
        app.router.add_get("/day/{day}", day)


def overlaps(log) -> list[tuple]:
    """Pairs of calls of one day by two different runs whose [start, end] intersect."""
    out = []
    by_day: dict[str, list] = {}
    for d, run, s, e in log:
        by_day.setdefault(d, []).append((s, e, run))
    for d, calls in by_day.items():
        calls.sort()
        for i, (_s1, e1, r1) in enumerate(calls):
            for s2, _e2, r2 in calls[i + 1:]:
                if s2 >= e1:
                    break
                if r1 != r2:
                    out.append((d, r1, r2))
    return out


def day(n: int) -> str:
    return (FIRST + timedelta(days=n)).isoformat()


async def drive_all(store, clock, engines, run_ids, rounds: int = 30) -> dict:
    """Rounds of both engines, a second apart: fewer than LOCK_RECHECK, so a lost wake-up fails the test."""
    for _ in range(rounds):
        await asyncio.gather(*(e.drive() for e in engines))
        runs = {r: await store.get_run(r) for r in run_ids}
        if all(run["state"] in ("succeeded", "partial", "failed") for run in runs.values()):
            return runs
        clock.advance(timedelta(seconds=1))
    raise AssertionError({r: run["state"] for r, run in runs.items()})


async def scenario(store, clock, tmp_path, api, base, name, on_conflict, ranges, source="range") -> tuple:
    ir = compile_yaml(tmp_path, overlap_yaml(base, name, on_conflict, source=source), name=f"{name}.yaml")
    await publish(store, ir)
    run_ids = []
    for i, (lo, hi) in enumerate(ranges):
        inp = {"from": day(lo), "to": day(hi)} if source == "range" else {"days": [day(n) for n in range(lo, hi + 1)]}
        run_ids.append((await store.create_run(PROJECT, ir.workflow_id, inp, f"{name}-{i}")).run_id)
    engines = [engine(store, clock=clock, worker_id=f"d{i}") for i in range(2)]
    runs = await drive_all(store, clock, engines, run_ids)
    for e in engines:
        await e.registry.aclose()
    parts = {r: {p["partition"]: dict(p) for p in await partitions_of(store, r)} for r in run_ids}
    return run_ids, runs, parts


def check(api, run_ids, runs, parts, ranges, on_conflict):
    assert overlaps(api.log) == [], overlaps(api.log)
    called = {(d, r) for d, r, _, _ in api.log}
    for r, (lo, hi) in zip(run_ids, ranges):
        assert runs[r]["state"] == "succeeded", (r, runs[r]["state"], runs[r]["error_message"])
        for n in range(lo, hi + 1):
            p = parts[r][day(n)]
            if p["state"] == "success":
                assert (day(n), r) in called
                continue
            assert on_conflict == "skip" and p["state"] == "skipped", p
            holder = p["skipped_by"].removeprefix("run:")
            assert holder in run_ids and holder != r and (day(n), holder) in called, p
    if on_conflict != "skip":                          # every run processed every one of its keys, once
        assert sorted(called) == sorted({(day(n), r) for r, (lo, hi) in zip(run_ids, ranges)
                                         for n in range(lo, hi + 1)})
    assert len(api.log) == len(called)                 # nothing called twice


def test_two_runs_over_the_same_range_take_turns_on_each_day(store, clock, aio, serve, tmp_path, pg_url):
    api = LoggingApi()
    base = serve(api.app())
    ranges = [(0, 9), (0, 9)]
    run_ids, runs, parts = aio(scenario(store, clock, tmp_path, api, base, "same-range", None, ranges))
    check(api, run_ids, runs, parts, ranges, "wait")
    from tests.runtime.pg import query
    waited = query(pg_url, "select count(*) from automation.run_events where kind = 'partition.waiting'")[0][0]
    assert waited > 0                                  # one of them did wait, and said on what
    assert query(pg_url, "select count(*) from automation.partition_locks") == [(0,)]       # all released
    assert query(pg_url, "select count(*) from automation.partition_lock_waiters") == [(0,)]


def test_on_conflict_skip_records_the_other_runs_id(store, clock, aio, serve, tmp_path):
    api = LoggingApi()
    base = serve(api.app())
    ranges = [(0, 5), (3, 8)]
    run_ids, runs, parts = aio(scenario(store, clock, tmp_path, api, base, "skip-range", "skip", ranges,
                                        source="foreach"))
    check(api, run_ids, runs, parts, ranges, "skip")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ranges=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 5)).map(lambda t: (t[0], t[0] + t[1])),
                       min_size=2, max_size=3),
       on_conflict=st.sampled_from([None, "skip"]), source=st.sampled_from(["range", "foreach"]))
def test_random_overlaps_never_process_a_key_twice_at_once(store, clock, aio, serve, tmp_path, ranges, on_conflict,
                                                           source):
    api = LoggingApi(delay=0.01)
    base = serve(api.app())
    name = f"prop-{time.monotonic_ns()}"
    run_ids, runs, parts = aio(scenario(store, clock, tmp_path, api, base, name, on_conflict, ranges, source))
    check(api, run_ids, runs, parts, ranges, on_conflict)


CODE_MAP = '''
import json
import urllib.request

from anthares44.automation import step, workflow


def fetch(base, day, key):
    req = urllib.request.Request(f"{base}/day/{day}", headers={"Idempotency-Key": key})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


@workflow("code-overlap", version=1)
async def overlap(ctx, input):
    return await step.map("load", input["days"], lambda day: fetch(input["baseUrl"], day, ctx.idempotency_key),
                          concurrency=3, timeout="5s")
'''


def test_code_map_items_take_the_same_locks(store, clock, aio, tmp_path):
    """A code workflow's `step.map` items are partitions too: two runs over overlapping days take turns."""
    from anthares44.automation.app.automation import Automation
    from tests.loopback import ThreadedServer

    class ThreadedLoggingApi(LoggingApi, ThreadedServer):
        def __init__(self):
            LoggingApi.__init__(self, delay=0.05)
            ThreadedServer.__init__(self)

    api = ThreadedLoggingApi()
    (tmp_path / "code_overlap.py").write_text(CODE_MAP)
    ranges = [(0, 5), (2, 7)]

    async def body():
        auto = Automation(store)
        assert (await auto.publish([str(tmp_path / "code_overlap.py")])).ok
        run_ids = [(await auto.run("code-overlap", {"baseUrl": api.url, "days": [day(n) for n in range(lo, hi + 1)]},
                                   f"k{i}")).run_id for i, (lo, hi) in enumerate(ranges)]
        engines = [engine(store, clock=clock, worker_id=f"d{i}") for i in range(2)]
        runs = await drive_all(store, clock, engines, run_ids)
        parts = {r: {p["partition"]: dict(p) for p in await partitions_of(store, r)} for r in run_ids}
        return run_ids, runs, parts

    try:
        run_ids, runs, parts = aio(body())
        check(api, run_ids, runs, parts, ranges, "wait")
    finally:
        api.close()
