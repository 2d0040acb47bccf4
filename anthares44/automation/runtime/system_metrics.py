"""The store's side of the metrics (docs/metrics.md): reading the values that describe the system from its rows at
scrape time (queries/metrics.sql), and adding a process's in-memory counters to the persisted totals.

Every process that reads them gets the same numbers and none resets on restart: depths, ages, runs by state and
lease re-grants are derived from rows that exist anyway (a re-grant is `runs.lease_reclaims`, written by the
claim); finished attempts from the rollup of migration 0010 (aggregating the whole log at each scrape costs
seconds) plus the deltas its trigger appends as they finish and `fold_attempts` moves into it (migration 0012, so a
finish costs one heap insert); what no row records (webhook rejections, dropped filter misses) is a counter row,
flushed in one batched upsert a second.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from .ingestion.metrics import COUNTERS, Counters


@dataclass
class SystemValues:
    queues: list[dict]
    runs: list[dict]
    bounds: list[float]         # upper bounds (seconds) of the step-duration buckets
    attempts: list[dict]        # one row per label set with `buckets`: finished attempts at or under each bound
    breakers: list[dict]
    deliveries: list[dict]
    counters: list[dict]        # the persisted totals: name, labels, value
    notifications: list[dict]   # pending / failed notifications per project, channel and state
    alerts: list[dict]          # firing alerts per project, rule, severity
    projects: list[str]         # projects that published something: their counters start at 0 before any run
    flow: list[dict]            # per project: flow keys paused now, pauses ever begun (§22)
    timers: list[dict]          # fired timers per project and workflow: fired, seconds, cumulative `buckets`
    waits: list[dict] = field(default_factory=list)     # open waits per project and kind, the oldest's age
    approvals_overdue: list[dict] = field(default_factory=list)    # open approvals past their first reminder
    flow_limits: list[dict] = field(default_factory=list)   # per flow limit: slots in use, parked, skipped (§22)
    buffers: list[dict] = field(default_factory=list)   # debounce / batch per project and workflow (§22)


# upper bounds (seconds) of the timer-lateness buckets: a timer is alert-worthy past a few seconds late
TIMER_LATENESS_BOUNDS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)


async def read(store) -> SystemValues:
    """Every system value, each family from one query (run side by side on the pool)."""
    (queues, runs, bounds, attempts, breakers, deliveries, counters, notifications, alerts,
     projects, flow, waits, timers, overdue, flow_limits, buffers) = await asyncio.gather(
        store.fetch("metrics_queues", now=store.clock.now()), store.fetch("metrics_runs"),
        store.fetchval("metrics_duration_bounds"), store.fetch("metrics_attempts"), store.fetch("metrics_breakers"),
        store.fetch("metrics_deliveries"), store.fetch("metrics_counters"), store.fetch("metrics_notifications"),
        store.fetch("alerts_firing_counts"), store.fetch("metrics_projects"),
        store.fetch("metrics_flow_pauses", now=store.clock.now()),
        store.fetch("metrics_waits", now=store.clock.now()),
        store.fetch("metrics_timer_lateness", bounds=list(TIMER_LATENESS_BOUNDS)),
        store.fetch("approvals_overdue_counts", now=store.clock.now()),
        store.fetch("metrics_flow_limits", now=store.clock.now()),
        store.fetch("flow_buffer_metrics"))
    return SystemValues(queues=[dict(r) for r in queues], runs=[dict(r) for r in runs], bounds=list(bounds),
                        attempts=_histograms(attempts, len(bounds)), breakers=[dict(r) for r in breakers],
                        deliveries=[dict(r) for r in deliveries], counters=[dict(r) for r in counters],
                        notifications=[dict(r) for r in notifications], alerts=[dict(r) for r in alerts],
                        projects=[r["project_id"] for r in projects], flow=[dict(r) for r in flow],
                        waits=[dict(r) for r in waits], flow_limits=[dict(r) for r in flow_limits],
                        buffers=[dict(r) for r in buffers],
                        timers=_lateness(timers, len(TIMER_LATENESS_BOUNDS)),
                        approvals_overdue=[dict(r) for r in overdue])


def _histograms(rows, n: int) -> list[dict]:
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["project_id"], r["workflow_id"], r["step_id"], r["kind"], r["status"])
        h = out.get(key)
        if h is None:
            h = out[key] = {"project_id": key[0], "workflow_id": key[1], "step_id": key[2], "kind": key[3],
                            "status": key[4], "attempts": 0, "retries": 0, "seconds": 0.0, "buckets": [0] * n}
        h["attempts"] += r["attempts"]
        h["retries"] += r["retries"]
        h["seconds"] += r["seconds"]
        for i in range(r["bucket"], n):  # `bucket` bounds lie below these durations: they count from the next on
            h["buckets"][i] += r["attempts"]
    return [out[k] for k in sorted(out)]


def _lateness(rows, n: int) -> list[dict]:
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["project_id"], r["workflow_id"])
        h = out.get(key)
        if h is None:
            h = out[key] = {"project_id": key[0], "workflow_id": key[1], "fired": 0, "seconds": 0.0,
                            "buckets": [0] * n}
        h["fired"] += r["fired"]
        h["seconds"] += r["seconds"]
        for i in range(r["bucket"], n):     # as _histograms: counted from the first bound at or above it
            h["buckets"][i] += r["fired"]
    return [out[k] for k in sorted(out)]


async def flush(store, counters: Counters = COUNTERS) -> int:
    """Add what `counters` counted since the last flush to the persisted totals; returns how many series moved."""
    taken = counters.take()
    if not taken:
        return 0
    try:
        await store.execute("metrics_counters_add", names=[t[0] for t in taken],
                            labels=[json.dumps(t[1], sort_keys=True) for t in taken],
                            increments=[t[2] for t in taken], now=store.clock.now())
    except BaseException:
        counters.give_back(taken)
        raise
    return len(taken)


async def fold_attempts(store) -> int | None:
    """Move the finished attempts' deltas into the rollup; how many moved, None if another process is folding."""
    return await store.fetchval("metrics_attempts_fold")
