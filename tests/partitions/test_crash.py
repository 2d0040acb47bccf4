"""kill -9 mid fan-out with real daemons: two `a44 automation serve` processes compete for one run of 12
partitions; the lease holder is killed while partitions are in flight. No partition is ever in flight twice at
once, none whose success the killed daemon recorded runs again, the interrupted ones run again with the same idempotency
key on the survivor, and the run completes."""

from __future__ import annotations

import asyncio

from tests.partitions.crash_support import SlowDays, kill_the_holder_mid_fan_out, setup_run
from tests.partitions.support import compile_yaml
from tests.runtime.pg import query

WF = """\
name: crash-days
version: 1
steps:
  - id: load
    uses: http
    timeout: 10s
    retry: {{max: 2, strategy: fixed, base: 50ms}}
    url: "{base}/day/{{{{ partition }}}}"
    partitions:
      foreach: "input.days"
      concurrency: 3
"""


def test_kill_9_of_the_lease_holder_mid_fan_out(pg_url, tmp_path):
    far = SlowDays()
    days = [f"2026-07-{d:02d}" for d in range(1, 13)]
    ir = compile_yaml(tmp_path, WF.format(base=far.url))
    run_id = asyncio.run(setup_run(pg_url, ir, tmp_path, {"days": days}))
    holder, survivor = kill_the_holder_mid_fan_out(pg_url, tmp_path, far, run_id, done=4)
    assert all(n == 1 for n in far.max_in_flight.values())            # never two workers on one partition
    assert all(1 <= far.calls[d] <= 2 for d in days)
    assert far.keys == {d: {f"{run_id}:load:{d}"} for d in days}      # one key per partition, whoever calls
    rows = query(pg_url, "select step_id, status, worker_id from automation.step_attempts where run_id = $1 "
                         "and step_id like 'load[%' order by started_at, attempt", run_id)
    by_part: dict[str, list] = {}
    for r in rows:
        by_part.setdefault(r["step_id"][5:-1], []).append((r["status"], r["worker_id"]))
    # recorded as done by the killed daemon: never called again (a call the far side answered but the daemon
    # died before recording is interrupted, and runs again: at least once, with the same key)
    committed = {d for d, seq in by_part.items() if seq == [("succeeded", holder)]}
    assert committed and all(far.calls[d] == 1 for d in committed)
    interrupted = {d for d, seq in by_part.items() if seq[0][0] == "lease_expired"}
    assert interrupted and all(by_part[d] == [("lease_expired", holder), ("succeeded", survivor)]
                               for d in interrupted)
    states = query(pg_url, "select state, count(*) as n from automation.run_partitions where run_id = $1 "
                           "group by state", run_id)
    assert [(s["state"], s["n"]) for s in states] == [("success", 12)]
