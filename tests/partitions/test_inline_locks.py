"""Partitions that run inline (a `pass` step: no external effect, ended in the transaction that records them) take
no partition lock (docs/partitions.md "One run per partition"): a lock taken and released around such work wrote
two rows and one more commit per chunk and kept nothing from running twice. They still respect a key another
unfinished run holds: that key waits for it (or is skipped with `onConflict: skip`), the others go on, and a lock
whose run ended (stale) does not hold them up."""

from __future__ import annotations

import json

import pytest

from tests.partitions.support import PROJECT, compile_yaml, publish
from tests.runtime.engine_support import engine
from tests.runtime.pg import query

YAML = """\
name: pass-days
version: 1
steps:
  - id: fan
    uses: pass
    timeout: 1s
    partitions:
      range: {from: "input.from", to: "input.to", every: 1d}
      concurrency: 4
{conflict}"""
DAYS = [f"2026-07-{d:02d}" for d in range(1, 9)]


def _log_lock_inserts(pg_url):
    query(pg_url, "create table public.lock_inserts (partition text)")
    query(pg_url, """create function public.log_lock_insert() returns trigger language plpgsql as $$
        begin insert into public.lock_inserts values (new.partition); return new; end $$""")
    query(pg_url, "create trigger log_lock_insert after insert on automation.partition_locks "
                  "for each row execute function public.log_lock_insert()")


def _hold(pg_url, run_id: str, day: str, state: str = "running") -> None:
    """Another run of the workflow holds `day` (a non-inline version of the step is processing it)."""
    query(pg_url, "update automation.runs set state = $2, next_wake_at = null where run_id = $1", run_id, state)
    query(pg_url, "insert into automation.partition_locks (project_id, workflow_id, step_id, partition, run_id, "
                  "taken_at) select project_id, workflow_id, 'fan', $2, run_id, now() from automation.runs "
                  "where run_id = $1", run_id, day)


async def _two_runs(store, ir):
    await publish(store, ir)
    held = (await store.create_run(PROJECT, ir.workflow_id, {"from": DAYS[0], "to": DAYS[-1]}, "holder")).run_id
    mine = (await store.create_run(PROJECT, ir.workflow_id, {"from": DAYS[0], "to": DAYS[-1]}, "mine")).run_id
    return held, mine


def _days_done(pg_url, run_id):
    return [r["partition"] for r in query(
        pg_url, "select partition from automation.run_partitions where run_id = $1 and state = 'success' "
                "order by partition", run_id)]


def test_a_pass_fan_out_writes_no_lock_and_waits_only_for_a_held_day(store, clock, aio, tmp_path, pg_url):
    ir = compile_yaml(tmp_path, YAML.replace("{conflict}", ""))
    holder, mine = aio(_two_runs(store, ir))
    _hold(pg_url, holder, DAYS[3])
    _log_lock_inserts(pg_url)
    got = aio(engine(store, clock=clock, worker_id="w1").run_once())
    assert query(pg_url, "select state from automation.runs where run_id = $1", mine)[0]["state"] == "waiting", got
    assert _days_done(pg_url, mine) == [d for d in DAYS if d != DAYS[3]]      # the others went on
    assert query(pg_url, "select partition from public.lock_inserts") == [], "an inline partition took a lock"
    waited = query(pg_url, "select data from automation.run_events where run_id = $1 and kind = "
                           "'partition.waiting'", mine)
    assert [json.loads(w["data"])["holder"] for w in waited] == [holder]
    # the holder ends: its lock goes, and the waiter processes the day (still without a lock of its own)
    query(pg_url, "delete from automation.partition_locks where run_id = $1", holder)
    query(pg_url, "update automation.runs set state = 'cancelled', lease_owner = null where run_id = $1", holder)
    clock.advance(120)      # past the lock's recheck, should the release's wake-up not reach it
    aio(engine(store, clock=clock, worker_id="w2").drive())
    assert query(pg_url, "select state from automation.runs where run_id = $1", mine)[0]["state"] == "succeeded"
    assert _days_done(pg_url, mine) == DAYS
    assert query(pg_url, "select partition from public.lock_inserts") == []


@pytest.mark.parametrize("holder_state, skipped", [("running", True), ("succeeded", False)],
                         ids=["live-holder", "stale-lock"])
def test_with_on_conflict_skip_only_a_live_holder_skips_the_day(store, clock, aio, tmp_path, pg_url, holder_state,
                                                                skipped):
    ir = compile_yaml(tmp_path, YAML.replace("{conflict}", "      onConflict: skip\n"))
    holder, mine = aio(_two_runs(store, ir))
    _hold(pg_url, holder, DAYS[2], holder_state)
    aio(engine(store, clock=clock, worker_id="w1").run_once())
    run = query(pg_url, "select state from automation.runs where run_id = $1", mine)[0]
    assert run["state"] == "succeeded"
    rows = query(pg_url, "select partition, state, skipped_by from automation.run_partitions where run_id = $1 "
                         "and partition = $2", mine, DAYS[2])
    if skipped:
        assert (rows[0]["state"], rows[0]["skipped_by"]) == ("skipped", f"run:{holder}"), rows
    else:
        assert rows[0]["state"] == "success", rows
