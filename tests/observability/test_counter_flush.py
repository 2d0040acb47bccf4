"""The in-memory counters reach the persisted totals (`automation.metric_counters`, docs/metrics.md) exactly once:
a flush that fails hands its counts back and the next one adds them; two flushes of the same counts never add
them twice; a process without an HTTP plane (`serve` alone) flushes too."""

from __future__ import annotations

import asyncio

import pytest

from anthares44.automation.app.metrics import Flusher, flush_counters
from anthares44.automation.runtime.ingestion.metrics import COUNTERS
from anthares44.automation.runtime.store.core import Store


def totals(aio, store) -> dict:
    return {(r["name"], tuple(sorted(r["labels"].items()))): r["value"] for r in aio(store.fetch("metrics_counters"))}


def test_a_failed_flush_loses_nothing_and_counts_nothing_twice(store, pg_url, aio, clock):
    COUNTERS.reset()
    COUNTERS.inc("webhook_rejected_total", 2, reason="bad_signature")
    COUNTERS.inc("event_filter_miss_total", trigger="trg_a")
    assert aio(flush_counters(store)) == 2
    assert aio(flush_counters(store)) == 0                  # nothing new: nothing written
    COUNTERS.inc("webhook_rejected_total", reason="bad_signature")

    closed = aio(Store.connect(pg_url, clock=clock))
    aio(closed.close())
    with pytest.raises(Exception):  # noqa: B017 - the pool is closed: the write fails
        aio(flush_counters(closed))
    assert totals(aio, store)[("webhook_rejected_total", (("reason", "bad_signature"),))] == 2
    assert aio(flush_counters(store)) == 1                  # the failed flush's count, handed back
    assert totals(aio, store) == {("webhook_rejected_total", (("reason", "bad_signature"),)): 3,
                                  ("event_filter_miss_total", (("trigger", "trg_a"),)): 1}
    COUNTERS.reset()


def test_flusher_flushes_while_running_and_on_stop(store, aio):
    COUNTERS.reset()

    async def body():
        flusher = Flusher(store, interval=0.05).start()
        COUNTERS.inc("events_published_total", outcome="created")
        for _ in range(100):
            await asyncio.sleep(0.05)
            if await store.fetch("metrics_counters"):
                break
        COUNTERS.inc("events_published_total", outcome="created")
        await flusher.stop()                                 # the last count goes with the final flush
    aio(body())
    assert totals(aio, store) == {("events_published_total", (("outcome", "created"),)): 2}
    COUNTERS.reset()
