"""Two `a44 automation serve` daemons (real processes) on one database run two runs of one workflow whose explicit
`from`/`to` ranges overlap (the issue 25 report: 10 of 10 shared days were in flight in both runs at once). With
the partition locks, no shared day is ever in flight in two runs at the same time: checked on the loopback API's
own log of each call and on the execution log's attempt timestamps; both runs process every day of their range."""

from __future__ import annotations

import asyncio
import threading
import time

from aiohttp import web

from tests.loopback import ThreadedServer
from tests.partitions.support import PROJECT, compile_yaml, publish
from tests.partitions.test_partition_locks import overlap_yaml, overlaps
from tests.runtime.daemon_support import ServeProcess, wait_until
from tests.runtime.pg import query

A = [f"2026-07-{d:02d}" for d in range(1, 11)]
B = [f"2026-07-{d:02d}" for d in range(5, 15)]


class SlowDays(ThreadedServer):
    """GET /day/{day}: 200 after 0.15 s; logs (day, run, start, end) of every call."""

    def __init__(self):
        self.log: list[tuple[str, str, float, float]] = []
        self.lock = threading.Lock()
        super().__init__()

    def routes(self, app):
        async def day(request):
            start = time.monotonic()
            await asyncio.sleep(0.15)
            with self.lock:
                self.log.append((request.match_info["day"], request.headers.get("Idempotency-Key", "").split(":")[0],
                                 start, time.monotonic()))
            return web.json_response({"ok": True})
        app.router.add_get("/day/{day}", day)


def _runs(store_url, ir):
    from anthares44.automation.runtime.store.core import Store

    async def go():
        store = await Store.connect(store_url, min_size=1, max_size=2)
        try:
            await publish(store, ir)
            out = []
            for key, days in (("a", A), ("b", B)):
                out.append((await store.create_run(PROJECT, ir.workflow_id, {"from": days[0], "to": days[-1]},
                                                   key)).run_id)
            return out
        finally:
            await store.close()
    return asyncio.run(go())


def test_two_daemons_never_process_a_day_in_two_runs_at_once(pg_url, tmp_path):
    api = SlowDays()
    ir = compile_yaml(tmp_path, overlap_yaml(api.url, "two-daemons", None, concurrency=4))
    daemons = [ServeProcess(pg_url, tmp_path, worker_id=f"d{i}") for i in (1, 2)]
    try:
        a, b = _runs(pg_url, ir)
        wait_until(lambda: query(pg_url, "select count(*) from automation.runs where state = 'succeeded'")
                   == [(2,)], 90, "both runs to succeed")
        assert overlaps(api.log) == [], overlaps(api.log)
        called = sorted((d, r) for d, r, _, _ in api.log)
        assert called == sorted([(d, a) for d in A] + [(d, b) for d in B])         # every day of each, once
        # the execution log says the same: per day, the attempts of the two runs never overlap in time
        rows = query(pg_url, "select run_id, step_id, started_at, finished_at from automation.step_attempts "
                             "where step_id like 'load[%' and kind = 'action' order by started_at")
        by_day: dict[str, list] = {}
        for run_id, step_id, started, finished in rows:
            by_day.setdefault(step_id, []).append((started, finished, run_id))
        shared = [f"load[{d}]" for d in A if d in B]
        assert all(len(by_day[s]) == 2 for s in shared)
        for s in shared:
            (s1, e1, r1), (s2, e2, r2) = sorted(by_day[s])
            assert r1 != r2 and e1 <= s2, (s, by_day[s])
        waited = query(pg_url, "select count(*) from automation.run_events where kind = 'partition.waiting'")
        assert waited[0][0] > 0
    finally:
        for d in daemons:
            d.stop()
        api.close()
