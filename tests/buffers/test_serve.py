"""Buffers across a real daemon's death: events buffered while `serve` A runs stay in the store when A is killed
with SIGKILL; `serve` B, started afterwards, flushes them into one run when the key is quiet (the flusher `serve`
runs beside the daemon, on the system clock)."""

from __future__ import annotations

import asyncio
import json

from anthares44.automation.app.publishing import publish
from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.ingestion.bus import publish_event
from anthares44.automation.runtime.store.core import Store
from tests.runtime.daemon_support import ServeProcess, wait_until

from .support import debounce_wf

P = "pj_default"


async def _with_store(url, tmp_path, fn):
    store = await Store.connect(url, clock=SystemClock(), results_dir=tmp_path / "results")
    try:
        return await fn(store)
    finally:
        await store.close()


def test_events_buffered_under_a_daemon_killed_9_are_flushed_by_the_next_one(pg_url, tmp_path):
    (tmp_path / "wf").mkdir()
    (tmp_path / "wf" / "doc.yaml").write_text(debounce_wf(quiet="5s", deliver="all"))

    async def setup(store):
        await store.migrate()
        await store.ensure_partitions()
        assert (await publish(store, P, [str(tmp_path / "wf")])).ok
    asyncio.run(_with_store(pg_url, tmp_path, setup))
    first = ServeProcess(pg_url, tmp_path, worker_id="first")
    second = None
    try:
        wait_until(lambda: "serving" in first.output(), 60, "the first daemon to serve")

        async def events(store):
            for i in range(3):
                await publish_event(store, P, "doc.changed", {"docId": "d", "n": i}, f"k{i}")
            return await store.fetchval("flow_buffer_next_due")
        asyncio.run(_with_store(pg_url, tmp_path, events))
        first.kill9()                                   # 5 s of quiet not passed: the buffer is open

        async def runs(store):
            async with store.pool.acquire() as conn:
                return [dict(r) for r in await conn.fetch(
                    "select run_id, input, state from automation.runs where workflow_id = 'wf_doc_sync'")]
        assert asyncio.run(_with_store(pg_url, tmp_path, runs)) == []
        second = ServeProcess(pg_url, tmp_path, worker_id="second")
        wait_until(lambda: any(r["state"] == "succeeded"
                               for r in asyncio.run(_with_store(pg_url, tmp_path, runs))), 60,
                   "the second daemon to flush the buffer and run it", interval=0.5)
        (run,) = asyncio.run(_with_store(pg_url, tmp_path, runs))
        got = run["input"] if isinstance(run["input"], dict) else json.loads(run["input"])
        assert [e["data"]["n"] for e in got["events"]] == [0, 1, 2]
    finally:
        for p in (first, second):
            if p is not None:
                p.stop()
