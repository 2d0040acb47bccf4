"""Helpers of the kill -9 tests: a slow loopback "daily data" API on its own thread, a run set up the way a
daemon finds it, and two real `a44 automation serve` processes of which the run's lease holder is killed with
partitions in flight."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable

from aiohttp import web

from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.store.core import Store
from tests.loopback import ThreadedServer
from tests.partitions.support import PROJECT, publish
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


async def setup_run(url, ir, home, input) -> str:
    """Migrate, publish `ir` and create its run with `input` (a fresh store on the system clock)."""
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.migrate()
        await store.ensure_partitions()
        await publish(store, ir)
        return (await store.create_run(PROJECT, ir.workflow_id, input, "k1")).run_id
    finally:
        await store.close()


def kill_the_holder_mid_fan_out(pg_url, home, far: SlowDays, run_id: str, *, done: int,
                                before_kill: Callable[[], None] | None = None) -> tuple[str, str]:
    """Daemons d1 and d2 drive the run; once `done` partitions answered and others are in flight, the lease
    holder is killed with SIGKILL and the survivor completes the run. Returns (holder, survivor)."""
    daemons = {w: ServeProcess(pg_url, home, worker_id=w) for w in ("d1", "d2")}
    try:
        wait_until(lambda: sum(far.done.values()) >= done and sum(far.in_flight.values()) > 0, 30,
                   "partitions finished and others in flight")
        if before_kill is not None:
            before_kill()
        holder = query(pg_url, "select lease_owner from automation.runs where run_id = $1", run_id)[0]["lease_owner"]
        daemons[holder].kill9()
        wait_until(lambda: query(pg_url, "select state from automation.runs where run_id = $1",
                                 run_id)[0]["state"] == "succeeded", 60, "the survivor to complete the run")
    finally:
        for p in daemons.values():
            p.stop()
        far.close()
    return holder, next(w for w in daemons if w != holder)
