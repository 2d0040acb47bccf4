"""`GET /metrics` as Prometheus text (prometheus_client's exposition of app/metrics.py's families), and the task
that adds this process's counters to the persisted totals once a second while the plane runs."""

from __future__ import annotations

import asyncio
import logging

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric

from ..app import metrics as app_metrics

log = logging.getLogger("a44.http")
FLUSH_INTERVAL_S = 1.0

__all__ = ["CONTENT_TYPE_LATEST", "flush_loop", "render_metrics"]


class _Snapshot:
    """A collector of families already collected (one scrape)."""

    def __init__(self, families: list[app_metrics.Family]):
        self.families = families

    def collect(self):
        for fam in self.families:
            metric = Metric(fam.name, fam.help, fam.kind)
            for name, labels, value in fam.samples:
                metric.add_sample(name, labels, value)
            yield metric


def render_metrics(families: list[app_metrics.Family]) -> bytes:
    return generate_latest(_Snapshot(families))


def flush_loop(store, interval: float = FLUSH_INTERVAL_S):
    """An aiohttp cleanup context: flush every `interval` seconds, and once more when the plane stops."""

    async def ctx(app):
        async def loop():
            while True:
                await asyncio.sleep(interval)
                try:
                    await app_metrics.flush_counters(store)
                except Exception as exc:  # noqa: BLE001 - the counts stay in memory and go with the next flush
                    log.warning("metrics flush failed: %s", exc)

        task = asyncio.create_task(loop())
        yield
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        try:
            await app_metrics.flush_counters(store)
        except Exception as exc:  # noqa: BLE001 - shutting down: say what is lost, do not fail the shutdown
            log.warning("metrics flush at shutdown failed: %s", exc)
    return ctx
