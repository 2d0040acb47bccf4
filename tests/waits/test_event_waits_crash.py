"""Event waits against their timeout with real daemons and `kill -9` (issue 28's second "done when", §20,
docs/waits.md "Event waits"): runs whose 2 s wait gets its correlated event at the timeout instant +- 50 ms while
one of two `a44 automation serve` daemons is killed and replaced several times. Every wait has exactly one
outcome: satisfied by its own run's event, received before the instant (the step's output is that event), or
timed out (output `timeout`, nothing in `satisfied_by`), never both; the wait step finishes once; no timed-out
wait is resumed by its late event. Issue scale (1,000 runs, 5 kills) under A44_SLOW=1, a bounded version by
default (where the events spread +- 500 ms, so both outcomes occur on a loaded machine)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading

import pytest

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.ingestion.bus import publish_event
from anthares44.automation.runtime.store.core import Store
from tests.runtime.daemon_support import ServeProcess, wait_until
from tests.runtime.engine_support import PROJECT
from tests.runtime.pg import query
from tests.waits.event_support import TYPE, event_workflow

SLOW = os.environ.get("A44_SLOW") == "1"
RUNS, KILLS = (1000, 5) if SLOW else (60, 3)
SPREAD_S = 0.05 if SLOW else 0.5     # the event at the instant +- this
pytestmark = pytest.mark.timeout(1800 if SLOW else 300)


async def _connect(url: str, home) -> Store:
    return await Store.connect(url, clock=SystemClock(), results_dir=home / "results")


async def _setup(url: str, home) -> list[str]:
    store = await _connect(url, home)
    try:
        await store.migrate()
        await store.ensure_partitions()
        ir = event_workflow("event-race", timeout="2s", on_timeout="continue")
        await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        return [(await store.create_run(PROJECT, ir.workflow_id, {"invoiceId": f"inv_{i}"}, f"race-{i}")).run_id
                for i in range(RUNS)]
    finally:
        await store.close()


async def _race(url: str, home, run_ids: list[str], rng) -> dict[str, str]:
    """Each run's event published at its wait's timeout instant +- SPREAD_S, scheduled as soon as the wait is
    seen open (the waits open over a few seconds, longer than their timeout): run_id -> event id."""
    store = await _connect(url, home)
    try:
        sent: dict[str, str] = {}
        tasks: dict[str, asyncio.Task] = {}

        async def one(row) -> None:
            delay = (row["timeout_at"] - SystemClock().now()).total_seconds() + rng.uniform(-SPREAD_S, SPREAD_S)
            await asyncio.sleep(max(0.0, delay))
            got = await publish_event(store, PROJECT, TYPE, {"invoiceId": row["invoice"]}, f"pay-{row['invoice']}")
            sent[row["run_id"]] = got.event_id

        while len(tasks) < len(run_ids):
            rows = await store.pool.fetch(
                "select w.run_id, w.timeout_at, r.input ->> 'invoiceId' as invoice from automation.run_waits w "
                "join automation.runs r on r.run_id = w.run_id where w.run_id = any($1) and w.step_id = 'pay'",
                [r for r in run_ids if r not in tasks])
            for row in rows:
                tasks[row["run_id"]] = asyncio.create_task(one(row))
            await asyncio.sleep(0.02)
        await asyncio.gather(*tasks.values())
        return sent
    finally:
        await store.close()


def _states(url: str, run_ids: list[str]) -> set[str]:
    return {r["state"] for r in query(url, "select state from automation.runs where run_id = any($1)", run_ids)}


def test_events_at_the_timeout_with_kill_9s_give_every_wait_exactly_one_outcome(pg_url, tmp_path):
    rng = random.Random(2830)
    run_ids = asyncio.run(_setup(pg_url, tmp_path))
    daemons = [ServeProcess(pg_url, tmp_path, worker_id="steady", lease="1s"),
               ServeProcess(pg_url, tmp_path, worker_id="race-0", lease="1s")]
    try:
        stop = threading.Event()

        def killer():
            for k in range(KILLS):
                if stop.wait(0.4):
                    return
                daemons[-1].kill9()
                daemons.append(ServeProcess(pg_url, tmp_path, worker_id=f"race-{k + 1}", lease="1s"))

        t = threading.Thread(target=killer)
        t.start()
        sent = asyncio.run(_race(pg_url, tmp_path, run_ids, rng))
        t.join()
        stop.set()
        wait_until(lambda: _states(pg_url, run_ids) == {"succeeded"}, 300, "every run to finish")
    finally:
        for d in daemons:
            d.stop()
    waits = {w["run_id"]: w for w in query(
        pg_url, "select w.run_id, w.state, w.satisfied_by, w.resumed_at, w.timeout_at, e.received_at "
                "from automation.run_waits w left join automation.events e "
                "on 'event:' || e.event_id = w.satisfied_by where w.run_id = any($1)", run_ids)}
    received = {r["event_id"]: r["received_at"] for r in query(
        pg_url, "select event_id, received_at from automation.events where event_id = any($1)", list(sent.values()))}
    steps = {a["run_id"]: a for a in query(
        pg_url, "select run_id, count(*) as n, max(result::text) as result from automation.step_attempts "
                "where run_id = any($1) and step_id = 'pay' and status = 'succeeded' group by run_id", run_ids)}
    assert len(waits) == len(steps) == len(sent) == RUNS and {a["n"] for a in steps.values()} == {1}
    kinds = {"satisfied": 0, "timed_out": 0}
    for run_id in run_ids:
        w, out = waits[run_id], json.loads(steps[run_id]["result"])
        kinds[w["state"]] += 1
        assert w["resumed_at"] is not None
        if w["state"] == "satisfied":       # by its own run's event, received before the instant
            assert w["satisfied_by"] == f"event:{sent[run_id]}" and w["received_at"] < w["timeout_at"]
            assert out["kind"] == "event" and out["event"]["id"] == sent[run_id]
        else:                               # timed out: its event never resumed it
            assert w["state"] == "timed_out" and w["satisfied_by"] is None and out == {"kind": "timeout"}
    late_but_satisfied = [r for r in run_ids if waits[r]["state"] == "satisfied"
                          and received[sent[r]] >= waits[r]["timeout_at"]]
    print(f"\nevent waits at the timeout: {RUNS} runs, {KILLS} kill -9: {kinds['satisfied']} satisfied, "
          f"{kinds['timed_out']} timed out, 0 with two outcomes, {len(late_but_satisfied)} timed-out resumed")
    assert sum(kinds.values()) == RUNS and late_but_satisfied == []
