"""Two schedulers (two daemons: separate connection pools) on one database, waking together: every occurrence is
decided once and started once, whether or not the per-trigger lock serialises them (the unique key alone must
hold)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from anthares44.automation.runtime.scheduling import Scheduler
from anthares44.automation.runtime.store import vocabulary as queries
from anthares44.automation.runtime.store.core import Store

from .support import add_trigger, publish_workflow, schedule_ir

UTC = UTC
T0 = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)     # America/New_York fall-back night


@pytest.mark.parametrize("with_lock", [True, False], ids=["lock", "unique-index-only"])
def test_two_schedulers_never_start_an_occurrence_twice(aio, store, clock, pg_url, tmp_path, monkeypatch, with_lock):
    if not with_lock:
        lock = queries.load_queries()["schedule_trigger_lock"]     # the same parameters, no lock taken
        monkeypatch.setitem(queries.load_queries(), lock.name, replace(lock, sql="select $1::text, $2::text"))
    clock.set(T0)
    aio(publish_workflow(store))
    triggers = [schedule_ir(f"trg_race_{i}", "* * * * *", "America/New_York", dst_policy="run-twice",
                            overlap="allow") for i in range(4)]
    triggers += [schedule_ir(f"trg_cu_{i}", "*/7 * * * *", "America/New_York", overlap="allow",
                             catch_up={"enabled": True, "max_occurrences": 4, "max_age_ms": None}) for i in range(2)]
    for ir in triggers:
        aio(add_trigger(store, ir, T0))
    other = aio(Store.connect(pg_url, clock=clock, results_dir=tmp_path / "r2"))
    a, b = Scheduler(store, clock=clock, name="a"), Scheduler(other, clock=clock, name="b")
    try:
        reports = []
        # 150 minutes across the fold (every 01:xx fires twice), ticking at uneven steps, both at once
        steps = [timedelta(seconds=s) for s in (20, 45, 60, 90, 33, 600)] * 14
        async def both():
            return await asyncio.gather(a.tick(), b.tick())

        for step in steps:
            clock.advance(step)
            reports.extend(aio(both()))
    finally:
        aio(other.close())
    decided_a, decided_b = reports[0::2], reports[1::2]
    keys_a = {k for r in decided_a for k in r.decided}
    keys_b = {k for r in decided_b for k in r.decided}
    assert keys_a and keys_b or (keys_a | keys_b)
    assert not keys_a & keys_b, "an occurrence was decided by both schedulers"

    async def counts():
        async with store.connection("t") as conn:
            return await conn.fetchrow(
                "select (select count(*) from automation.schedule_occurrences) as occ, "
                "(select count(*) from automation.schedule_occurrences where status = 'started') as started, "
                "(select count(*) from automation.schedule_occurrences where status = 'started' and run_id is null) "
                "  as unlinked, "
                "(select count(*) from automation.runs) as runs, "
                "(select count(distinct idempotency_key) from automation.runs) as keys, "
                "(select count(*) from automation.runs r join automation.schedule_occurrences o "
                "   on o.run_id = r.run_id and o.occurrence_key = r.idempotency_key) as matched")

    c = aio(counts())
    assert c["occ"] > 300 and c["unlinked"] == 0
    assert c["runs"] == c["started"] == c["keys"] == c["matched"]
    created = sum(len(r.runs_created) for r in reports)
    assert created == c["runs"]            # no run was created twice, none by a loser
    # run-twice across the fold: 01:00..01:59 fired at both offsets for every minutely trigger
    async def fold_count():
        async with store.connection("t") as conn:
            return await conn.fetchval("select count(*) from automation.schedule_occurrences "
                                       "where trigger_id = 'trg_race_0' and occurrence_key like '%T01:%-05:00'")
    assert aio(fold_count()) == 60
