"""The issue's first "done when" for event waits (§20, docs/waits.md "Event waits"): runs each with its own
`invoiceId`, each run's event published at a random offset in [-2 s, +2 s] around the run's creation (about half
before the run exists), while an engine drives the runs concurrently (its looks interleave with the publishing
on other connections). With `since: -1m` every run is satisfied by its own event: no timeout, no cross-run
match. With the default `since: run_start` an event published before its run is not matched and is counted
(the wait's `before_since`, metric `wait_event_before_since_total`); one published after always is.
Issue scale (10,000 runs) under A44_SLOW=1, a bounded version by default; a ManualClock carries the timeline."""

from __future__ import annotations

import asyncio
import os
import random
import time
from datetime import timedelta

import pytest

from anthares44.automation.runtime.ingestion.metrics import COUNTERS
from tests.runtime.engine_support import Script, engine
from tests.waits.event_support import event_workflow, pay, publish, start

SLOW = os.environ.get("A44_SLOW") == "1"
RUNS = 10_000 if SLOW else 300
pytestmark = pytest.mark.timeout(3600 if SLOW else 300)     # issue scale: several minutes on a shared machine


async def _timeline(store, clock, ir, rng, tag: str) -> dict[str, float]:
    """Create RUNS runs 10 ms of virtual time apart and publish each one's event at its offset; an engine drives
    meanwhile. Returns run_id -> the event's offset (s) from its run's creation."""
    actions = []
    for i in range(RUNS):
        at, off = i * 0.01, rng.uniform(-2, 2)
        actions += [(at, 1, "run", i, off), (at + off, 0 if off < 0 else 2, "event", i, off)]
    actions.sort()
    t0, offsets, run_of = clock.now(), {}, {}
    eng = engine(store, Script(), clock=clock, concurrency=32)
    done = asyncio.Event()

    async def driver():
        while not done.is_set():
            if not await eng.run_once():
                await asyncio.sleep(0.005)

    task = asyncio.create_task(driver())
    try:
        for at, _, what, i, off in actions:
            target = t0 + timedelta(seconds=at + 2)
            if target > clock.now():
                clock.set(target)
            if what == "run":
                run_of[i] = await start(store, ir, f"inv_{tag}_{i}")
                offsets[run_of[i]] = off
            else:
                await pay(store, f"inv_{tag}_{i}", key=f"pay-{tag}-{i}")
            await asyncio.sleep(0)
    finally:
        done.set()
        await task
    return offsets


async def _finish(store, clock, run_ids) -> None:
    """Past every wait's timeout: the engine settles every run. Twice: a run the engine had not visited before the
    first jump opens its wait (and its hour) only then, so one jump alone left such waits open under load."""
    eng = engine(store, Script(), clock=clock, concurrency=32)
    for _ in range(2):
        clock.advance(3601)
        await eng.drive(max_rounds=100_000)


async def _results(store, run_ids) -> dict[str, dict]:
    rows = await store.pool.fetch(
        "select r.run_id, r.state, r.input ->> 'invoiceId' as invoice, w.state as wait, w.output, e.before_since "
        "from automation.runs r join automation.run_waits w on w.run_id = r.run_id "
        "join automation.run_event_waits e on (e.run_id, e.epoch, e.step_id) = (w.run_id, w.epoch, w.step_id) "
        "where r.run_id = any($1)", list(run_ids))
    return {r["run_id"]: dict(r) for r in rows}


def _output(row):
    import json

    out = row["output"]
    return json.loads(out) if isinstance(out, str) else out


def test_with_a_one_minute_lookback_every_run_gets_its_own_event_whichever_came_first(store, clock, aio):
    ir = event_workflow("scale-lookback", since="-1m", timeout="1h", on_timeout="continue")
    aio(publish(store, ir))
    started = time.monotonic()
    offsets = aio(_timeline(store, clock, ir, random.Random(2028), "lb"))
    aio(_finish(store, clock, offsets))
    got = aio(_results(store, offsets))
    before = sum(1 for o in offsets.values() if o < 0)
    satisfied = [r for r in got.values() if r["wait"] == "satisfied"]
    cross = [r for r in satisfied if _output(r)["event"]["data"]["invoiceId"] != r["invoice"]]
    timeouts = [r for r in got.values() if r["wait"] != "satisfied"]
    print(f"\nevent waits, since -1m: {RUNS} runs, {before} events before their run: {len(satisfied)} satisfied, "
          f"{len(timeouts)} timeouts, {len(cross)} cross-run matches, {time.monotonic() - started:.1f} s")
    assert len(got) == RUNS and 0.4 * RUNS < before < 0.6 * RUNS
    assert (len(satisfied), len(timeouts), len(cross)) == (RUNS, 0, 0)
    assert {r["state"] for r in got.values()} == {"succeeded"}


def test_with_since_run_start_an_event_before_its_run_is_not_matched_and_is_counted(store, clock, aio):
    ir = event_workflow("scale-run-start", timeout="1h", on_timeout="continue")
    aio(publish(store, ir))
    counted = COUNTERS.get("wait_event_before_since_total")
    offsets = aio(_timeline(store, clock, ir, random.Random(2029), "rs"))
    aio(_finish(store, clock, offsets))
    got = aio(_results(store, offsets))
    early = {r for r, o in offsets.items() if o < 0}
    wrong = [r for r, row in got.items() if (row["wait"] == "satisfied") == (r in early)]
    cross = [r for r in got.values() if r["wait"] == "satisfied"
             and _output(r)["event"]["data"]["invoiceId"] != r["invoice"]]
    skipped = sum(r["before_since"] for r in got.values())
    print(f"\nevent waits, since run_start: {RUNS} runs, {len(early)} events before their run: "
          f"{sum(1 for r in got.values() if r['wait'] == 'satisfied')} satisfied, {skipped} counted as before, "
          f"{len(wrong)} wrong, {len(cross)} cross-run")
    assert (wrong, cross) == ([], [])
    assert skipped == len(early) == COUNTERS.get("wait_event_before_since_total") - counted
    assert {got[r]["wait"] for r in early} == {"timed_out"} and {got[r]["state"] for r in early} == {"succeeded"}
