"""kill -9 mid fan-out with real daemons: two `a44 automation serve` processes compete for one run of 12
partitions; the lease holder is killed while partitions are in flight. No partition is ever in flight twice at
once, none whose success the killed daemon recorded runs again, the interrupted ones run again with the same idempotency
key on the survivor, and the run completes."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from aiohttp import web

from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.store import Store
from tests.loopback import ThreadedServer
from tests.partitions.support import PROJECT, compile_yaml, publish
from tests.runtime.daemon_support import ServeProcess, wait_until
from tests.runtime.pg import query


class SlowDays(ThreadedServer):
    """GET /day/{d}: answers after 0.4 s; records per day the calls, their keys, and how many were in flight."""

    def __init__(self):
        self.calls: Counter[str] = Counter()
        self.done: Counter[str] = Counter()
        self.keys: dict[str, set[str]] = {}
        self.in_flight: Counter[str] = Counter()
        self.max_in_flight: Counter[str] = Counter()
        self.lock = threading.Lock()
        super().__init__()

    def routes(self, app):
        async def day(request):
            d = request.match_info["day"]
            with self.lock:
                self.calls[d] += 1
                self.keys.setdefault(d, set()).add(request.headers.get("Idempotency-Key", ""))
                self.in_flight[d] += 1
                self.max_in_flight[d] = max(self.max_in_flight[d], self.in_flight[d])
            try:
                await asyncio.sleep(0.4)
                with self.lock:
                    self.done[d] += 1
                return web.json_response({"day": d})
            finally:
                with self.lock:
                    self.in_flight[d] -= 1
        app.router.add_get("/day/{day}", day)


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


async def _setup(url, ir, home, days) -> str:
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.migrate()
        await store.ensure_partitions()
        await publish(store, ir)
        return (await store.create_run(PROJECT, ir.workflow_id, {"days": days}, "k1")).run_id
    finally:
        await store.close()


def test_kill_9_of_the_lease_holder_mid_fan_out(pg_url, tmp_path):
    far = SlowDays()
    days = [f"2026-07-{d:02d}" for d in range(1, 13)]
    ir = compile_yaml(tmp_path, WF.format(base=far.url))
    run_id = asyncio.run(_setup(pg_url, ir, tmp_path, days))
    daemons = {w: ServeProcess(pg_url, tmp_path, worker_id=w) for w in ("d1", "d2")}
    try:
        wait_until(lambda: sum(far.done.values()) >= 4 and sum(far.in_flight.values()) > 0, 30,
                   "partitions finished and others in flight")
        holder = query(pg_url, "select lease_owner from automation.runs where run_id = $1", run_id)[0]["lease_owner"]
        daemons[holder].kill9()
        wait_until(lambda: query(pg_url, "select state from automation.runs where run_id = $1",
                                 run_id)[0]["state"] == "succeeded", 60, "the survivor to complete the run")
    finally:
        for p in daemons.values():
            p.stop()
        far.close()
    survivor = next(w for w in daemons if w != holder)
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
