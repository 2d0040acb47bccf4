"""Issue 27's done-when at CI scale: runs sleeping 30 d, a daemon restart (a new store and engine) and the publish of
a new version in between; each wakes within 1 s (virtual) of the instant stored when its sleep opened and finishes
on the version it was pinned to. 200 runs by default, 5,000 with A44_SLOW=1.

The daemon is the in-process engine on the VirtualClock, driven as `serve` drives it: it sleeps until the earliest
`next_wake_at` of the released runs (the clock jumps there) and claims what is due then."""

from __future__ import annotations

import os
from datetime import timedelta

from anthares44.automation.calendar import Span, due_for
from anthares44.automation.runtime.store.core import Store
from tests.partitions.support import compile_yaml, publish
from tests.runtime.engine_support import PROJECT, engine

RUNS = 5_000 if os.environ.get("A44_SLOW") == "1" else 200
BATCHES = 20

WORKFLOW = """\
name: renewal
version: {version}
maxDuration: 40d
steps:
  - id: charge
    uses: pass
    timeout: 15s
  - id: cycle
    sleep: {{for: 30d, tz: America/Sao_Paulo}}
  - id: {last}
    uses: pass
    timeout: 15s
"""


async def drive_until_done(eng, store, clock) -> None:
    """The daemon's loop on a virtual clock: jump to the earliest due run, claim and drive what is due."""
    while True:
        async with store.connection("test_next_due") as conn:
            due = await conn.fetchval("select min(next_wake_at) from automation.runs "
                                      "where state not in ('succeeded', 'partial', 'failed', 'cancelled')")
        if due is None:
            return
        if due > clock.now():
            clock.set(due)
        await eng.drive()


def test_sleeping_runs_survive_a_restart_and_a_publish_and_wake_on_time(pg_url, store, clock, aio, tmp_path):
    v1 = compile_yaml(tmp_path, WORKFLOW.format(version=1, last="report"), "v1.yaml")
    aio(publish(store, v1))
    first = engine(store, clock=clock, worker_id="before", concurrency=64)
    runs: list[str] = []
    for b in range(BATCHES):            # the sleeps open over 20 virtual minutes: every batch its own instant
        for i in range(RUNS // BATCHES):
            runs.append(aio(store.create_run(PROJECT, v1.workflow_id, {}, f"k{b}-{i}")).run_id)
        aio(first.drive())
        clock.advance(60)

    clock.advance(timedelta(days=3))    # the daemon goes down; a new version is published while the runs sleep
    v2 = compile_yaml(tmp_path, WORKFLOW.format(version=2, last="audit"), "v2.yaml")
    aio(publish(store, v2))
    restarted = aio(Store.connect(pg_url, clock=clock, results_dir=tmp_path / "results2"))
    try:
        aio(drive_until_done(engine(restarted, clock=clock, worker_id="after", concurrency=64), restarted, clock))
        rows = aio(_attempts(restarted))
    finally:
        aio(restarted.close(timeout=30))

    assert len(rows) == len(runs)
    for r in rows:
        assert (r["state"], r["version"], r["last"]) == ("succeeded", 1, "report"), r
        assert r["due_at"] == due_for(r["opened_at"], Span(days=30), "America/Sao_Paulo")   # stored once
        assert timedelta(0) <= r["fired_at"] - r["due_at"] <= timedelta(seconds=1), r
        assert r["late_ms"] <= 1000


async def _attempts(store) -> list[dict]:
    async with store.connection("test_timer_rows") as conn:
        rows = await conn.fetch("""
            select r.run_id, r.state, r.version, a.due_at, a.started_at as opened_at, a.finished_at as fired_at,
                   (a.result ->> 'late_ms')::integer as late_ms,
                   (select l.step_id from automation.step_attempts l
                    where l.run_id = r.run_id and l.step_id in ('report', 'audit')) as last
            from automation.runs r
            join automation.step_attempts a on a.run_id = r.run_id and a.step_id = 'cycle'
            order by r.run_id""")
    return [dict(r) for r in rows]
