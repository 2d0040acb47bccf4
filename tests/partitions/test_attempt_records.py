"""Attempts written together travel as one operation (migration 0047, runtime/engine/attempt_records.py): a chunk
of `pass` partitions inserts its attempts and their events in one statement each and counts them in the step
metrics as a few sums instead of a delta row per attempt; the log and the metrics read exactly as before."""

from __future__ import annotations

from anthares44.automation.runtime.engine.attempt_records import coalesce
from anthares44.automation.runtime.system_metrics import fold_attempts, read
from tests.partitions.support import PROJECT, compile_yaml, publish
from tests.runtime.engine_support import engine
from tests.runtime.pg import query

YAML = """\
name: pass-items
version: 1
steps:
  - id: fan
    uses: pass
    timeout: 1s
    partitions:
      foreach: "input.items"
      concurrency: 4
"""
ITEMS = [f"k{i:04d}" for i in range(300)]


def test_records_between_partition_rows_become_one_op_and_events_keep_their_order():
    rec = [("attempt_record", {"step_id": f"s[{i}]"}) for i in range(3)]
    ps = [("partition_state", {"partition": str(i)}) for i in range(3)]
    ev = ("run_event", {"kind": "partition.skipped"})
    ops = [rec[0], ps[0], rec[1], ps[1], ev, rec[2], ps[2]]
    assert coalesce(ops) == [("attempt_records", {"rows": [rec[0][1], rec[1][1]]}), ps[0], ps[1], ev, rec[2], ps[2]]
    assert coalesce([rec[0], ps[0]]) == [rec[0], ps[0]]            # a lone record is sent as before
    assert coalesce([rec[0], ev, rec[1]]) == [rec[0], ev, rec[1]]   # an event between: never reordered


def _figures(aio, store, workflow: str) -> dict:
    return {(a["step_id"], a["status"]): a["attempts"] for a in aio(read(store)).attempts
            if a["workflow_id"] == workflow}


def test_a_pass_fan_out_writes_its_attempts_events_and_metrics_in_sums(store, clock, aio, tmp_path, pg_url):
    ir = compile_yaml(tmp_path, YAML)

    async def start():
        await publish(store, ir)
        return (await store.create_run(PROJECT, ir.workflow_id, {"items": ITEMS}, "one")).run_id

    run_id = aio(start())
    aio(engine(store, clock=clock, worker_id="w1").drive())
    assert query(pg_url, "select state from automation.runs where run_id = $1", run_id)[0]["state"] == "succeeded"
    parts = query(pg_url, "select step_id from automation.run_events where run_id = $1 and kind = "
                          "'attempt.finished' and step_id like 'fan[%' order by id", run_id)
    assert [p["step_id"] for p in parts] == [f"fan[{k}]" for k in ITEMS]       # one each, in partition order
    assert query(pg_url, "select count(*) from automation.step_attempts where run_id = $1 and step_id like "
                         "'fan[%' and status = 'succeeded'", run_id) == [(len(ITEMS),)]
    # no delta row per partition: a few sums (one per chunk and duration bucket) count them all
    assert query(pg_url, "select count(*) from automation.metric_attempt_deltas where step_id = 'fan' and "
                         "run_id = $1", run_id)[0][0] <= 1          # the step's own attempt at most
    sums = query(pg_url, "select count(*), coalesce(sum(attempts), 0) from automation.metric_attempt_sums "
                         "where run_id = $1", run_id)[0]
    assert sums[0] <= 4 and sums[1] >= len(ITEMS), sums
    before = _figures(aio, store, ir.workflow_id)
    assert before == {("fan", "succeeded"): len(ITEMS) + 1}            # the partitions and the step itself
    assert aio(fold_attempts(store)) == len(ITEMS) + 1
    assert query(pg_url, "select count(*) from automation.metric_attempt_sums") == [(0,)]
    assert _figures(aio, store, ir.workflow_id) == before
