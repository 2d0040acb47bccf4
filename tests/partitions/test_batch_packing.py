"""How a batch's operations are packed (runtime/engine/batch_packing.py, migration 0047): a chunk of `pass`
partitions inserts its attempts and their events in one statement each and counts them in the step metrics as a
few sums instead of a delta row per attempt; a partition planned and ended in one batch is one row insert, not an
insert and an update; the log, the partition rows and the metrics read exactly as before."""

from __future__ import annotations

from anthares44.automation.runtime.engine.batch_packing import coalesce, items_after_rows, superseded_dropped
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
      {source}
      concurrency: 4
"""
FOREACH = 'foreach: "input.items"'
RANGE = 'range: {from: "input.from", to: "input.to", every: 1d}'
ITEMS = [f"k{i:04d}" for i in range(300)]


def test_records_and_partition_rows_become_one_op_each_and_events_keep_their_order():
    rec = [("attempt_record", {"step_id": f"s[{i}]"}) for i in range(3)]
    ps = [("partition_state", {"step_id": "s", "partition": str(i), "worker_id": "w"}) for i in range(3)]
    ev = ("run_event", {"kind": "partition.skipped"})
    ops = [rec[0], ps[0], rec[1], ps[1], ev, rec[2], ps[2]]
    assert coalesce(ops) == [("attempt_records", {"rows": [rec[0][1], rec[1][1]]}),
                             ("partition_states", {"rows": [ps[0][1], ps[1][1]]}), ev, rec[2], ps[2]]
    assert coalesce([rec[0], ps[0]]) == [rec[0], ps[0]]            # a lone one is sent as before
    assert coalesce([rec[0], ev, rec[1]]) == [rec[0], ev, rec[1]]   # an event between: never reordered
    # one upsert cannot touch a row twice: the same partition again opens a second group
    again = ("partition_state", {"step_id": "s", "partition": "0", "worker_id": None})
    assert coalesce([ps[0], ps[1], again]) == [("partition_states", {"rows": [ps[0][1], ps[1][1]]}), again]


def test_a_partition_row_superseded_in_the_batch_is_written_once_and_items_follow_the_rows():
    pending = ("partition_state", {"step_id": "s", "partition": "1", "state": "pending", "worker_id": None})
    final = ("partition_state", {"step_id": "s", "partition": "1", "state": "success", "worker_id": "w"})
    other = ("partition_state", {"step_id": "s", "partition": "2", "state": "pending", "worker_id": None})
    rec = ("attempt_record", {"step_id": "s[1]"})
    conflict = ("partition_conflict", {"partition": "1"})
    assert superseded_dropped([pending, other, rec, final]) == [other, rec, final]
    assert superseded_dropped([pending, conflict, final]) == [pending, conflict, final]    # it reads the row
    assert superseded_dropped([final, pending]) == [final, pending]       # the later names no worker: kept
    items = ("partition_items", {"step_id": "s"})
    transition = ("run_transition", {})
    assert items_after_rows([items, rec, final, transition, other]) == [rec, final, items, transition, other]
    assert items_after_rows([items, rec, final]) == [rec, final, items]


def _figures(aio, store, workflow: str) -> dict:
    return {(a["step_id"], a["status"]): a["attempts"] for a in aio(read(store)).attempts
            if a["workflow_id"] == workflow}


def _log_partition_updates(pg_url):
    query(pg_url, "create table public.partition_updates (partition text)")
    query(pg_url, """create function public.log_partition_update() returns trigger language plpgsql as $$
        begin insert into public.partition_updates values (new.partition); return new; end $$""")
    query(pg_url, "create trigger log_partition_update after update on automation.run_partitions "
                  "for each row execute function public.log_partition_update()")


def test_a_pass_fan_out_writes_its_attempts_events_and_metrics_in_sums(store, clock, aio, tmp_path, pg_url):
    ir = compile_yaml(tmp_path, YAML.replace("{source}", FOREACH))
    _log_partition_updates(pg_url)

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
    # planned and ended in one transaction: each partition's row inserted once, final, with its item's place
    assert query(pg_url, "select count(*) from public.partition_updates") == [(0,)]
    rows = query(pg_url, "select partition, ordinal, state from automation.run_partitions where run_id = $1 "
                         "order by ordinal", run_id)
    assert [tuple(r) for r in rows] == [(k, i, "success") for i, k in enumerate(ITEMS)]
    assert query(pg_url, "select count(*) from automation.partition_items where run_id = $1", run_id) == [
        (len(ITEMS),)]


def test_a_range_plan_run_on_the_spot_writes_each_partition_row_once(store, clock, aio, tmp_path, pg_url):
    ir = compile_yaml(tmp_path, YAML.replace("{source}", RANGE))
    _log_partition_updates(pg_url)

    async def start():
        await publish(store, ir)
        return (await store.create_run(PROJECT, ir.workflow_id, {"from": "2026-01-01", "to": "2026-03-31"},
                                       "days")).run_id

    run_id = aio(start())
    aio(engine(store, clock=clock, worker_id="w1").drive())
    assert query(pg_url, "select state from automation.runs where run_id = $1", run_id)[0]["state"] == "succeeded"
    assert query(pg_url, "select count(*) from public.partition_updates") == [(0,)]
    rows = query(pg_url, "select state, attempts, worker_id from automation.run_partitions where run_id = $1",
                 run_id)
    assert len(rows) == 90 and {tuple(r) for r in rows} == {("success", 1, "w1")}
