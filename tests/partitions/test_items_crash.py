"""kill -9 mid fan-out over items (docs/partitions.md "Fan-out over items"), as tests/partitions/test_crash.py does
for days: two real `a44 automation serve` processes, 40 items keyed by `item.id`, the lease holder killed with
SIGKILL while items are in flight. No item is lost (every item succeeds, once recorded), none is duplicated (an
item the killed daemon recorded is never called again; an interrupted one is called again with the same
idempotency key, by the survivor), never two calls of one item at once, and the plan (items and keys) is the one
the killed daemon recorded."""

from __future__ import annotations

import asyncio

from tests.partitions.crash_support import SlowDays, kill_the_holder_mid_fan_out, setup_run
from tests.partitions.support import compile_yaml
from tests.runtime.pg import query

WF = """\
name: crash-items
version: 1
steps:
  - id: bill
    uses: http
    timeout: 10s
    retry: {{max: 2, strategy: fixed, base: 50ms}}
    url: "{base}/day/{{{{ item.id }}}}"
    partitions:
      foreach: "input.invoices"
      key: "item.id"
      concurrency: 4
"""


def test_kill_9_mid_fan_out_over_items_loses_and_duplicates_no_item(pg_url, tmp_path):
    far = SlowDays()
    invoices = [{"id": f"inv-{i:03d}", "amount": i} for i in range(40)]
    ids = [i["id"] for i in invoices]
    ir = compile_yaml(tmp_path, WF.format(base=far.url))
    run_id = asyncio.run(setup_run(pg_url, ir, tmp_path, {"invoices": invoices}))
    holder, survivor = kill_the_holder_mid_fan_out(pg_url, tmp_path, far, run_id, done=6)
    assert all(n == 1 for n in far.max_in_flight.values())            # never two workers on one item
    assert sorted(far.calls) == ids and all(1 <= far.calls[k] <= 2 for k in ids)
    assert far.keys == {k: {f"{run_id}:bill:{k}"} for k in ids}       # one key per item, whoever calls
    rows = query(pg_url, "select step_id, status, worker_id from automation.step_attempts where run_id = $1 "
                         "and step_id like 'bill[%' order by started_at, attempt", run_id)
    by_item: dict[str, list] = {}
    for r in rows:
        by_item.setdefault(r["step_id"][5:-1], []).append((r["status"], r["worker_id"]))
    assert sorted(by_item) == ids
    committed = {k for k, seq in by_item.items() if seq == [("succeeded", holder)]}
    assert committed and all(far.calls[k] == 1 for k in committed)    # recorded by the killed daemon: not again
    interrupted = {k for k, seq in by_item.items() if seq[0][0] == "lease_expired"}
    assert interrupted and all(by_item[k] == [("lease_expired", holder), ("succeeded", survivor)]
                               for k in interrupted)
    assert all(seq[-1][0] == "succeeded" and [s for s, _ in seq].count("succeeded") == 1 for seq in by_item.values())
    states = query(pg_url, "select state, count(*) as n from automation.run_partitions where run_id = $1 "
                           "group by state", run_id)
    assert [(s["state"], s["n"]) for s in states] == [("success", 40)]
    items = query(pg_url, "select partition from automation.partition_items where run_id = $1 order by ordinal",
                  run_id)
    assert [r["partition"] for r in items] == ids                     # planned once, by whoever planned first
