"""`GET /metrics` as Prometheus text (prometheus_client's exposition of app/metrics.py's families), and the
flushing of this process's counters into the persisted totals while the plane runs."""

from __future__ import annotations

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric

from ..app import metrics as app_metrics

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


def flush_loop(store):
    """An aiohttp cleanup context: this process's counters flushed while the plane runs, and when it stops."""

    async def ctx(app):
        flusher = app_metrics.Flusher(store).start()
        yield
        await flusher.stop()
    return ctx
