"""The use case "collect the metrics" (§16, docs/metrics.md): every metric as plain families of samples, for the
HTTP edge to render as Prometheus text (`GET /metrics`) and the CLI to print (`a44 automation metrics`).

System values (depths, ages, runs by state, attempts, totals) come from the store at collection time, so every
process reports the same numbers; this process's own in-memory counters are added labelled `worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass, field

from ..errors import A44Error
from ..runtime import system_metrics
from ..runtime.ingestion.metrics import COUNTERS, HELP
from ..runtime.outage import OUTAGE

BREAKER_STATES = ("closed", "open", "half_open")
FLUSH_INTERVAL_S = 1.0
log = logging.getLogger("a44.metrics")


@dataclass
class Family:
    """One metric: `name` as exposed (a counter's without `_total`, added to its samples), its type, its help,
    and samples (sample name, labels, value)."""
    name: str
    kind: str                   # gauge | counter | histogram
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def add(self, labels: dict, value: float, suffix: str = "") -> None:
        self.samples.append((self.name + suffix, {k: str(v) for k, v in labels.items()}, value))


def worker_name() -> str:
    """This process in the `worker` label of its own counters."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def collect(store, *, worker: str | None = None) -> list[Family]:
    values = await system_metrics.read(store)
    return [*_system(values), *_process(worker or worker_name())]


def _system(v: system_metrics.SystemValues) -> list[Family]:
    dlq = Family("automation_dlq_depth", "gauge", "dead letters waiting (not redriven), per queue")
    age = Family("automation_oldest_message_age_seconds", "gauge",
                 "age of the oldest message waiting in the queue (0: none waits)")
    waiting = Family("automation_queue_waiting", "gauge", "runs waiting in the queue (pending)")
    for q in v.queues:
        labels = {"project": q["project_id"], "queue": q["queue"]}
        dlq.add(labels, q["dlq_depth"])
        age.add(labels, round(q["oldest_age_s"], 3))
        waiting.add(labels, q["waiting"])

    runs = Family("automation_runs", "gauge", "runs by state")
    reclaims = Family("automation_lease_reclaim", "counter", "lease re-grants (a lease taken over after it expired)")
    redeliveries = Family("automation_run_redeliveries", "counter", "queue redeliveries of failed runs")
    by_project: dict[str, int] = dict.fromkeys(v.projects, 0)     # a counter is 0 before the first run, not absent
    by_workflow: dict[tuple[str, str], int] = {}
    for r in v.runs:
        runs.add({"project": r["project_id"], "workflow": r["workflow_id"], "state": r["state"]}, r["runs"])
        by_project[r["project_id"]] = by_project.get(r["project_id"], 0) + r["lease_reclaims"]
        key = (r["project_id"], r["workflow_id"])
        by_workflow[key] = by_workflow.get(key, 0) + r["redeliveries"]
    for project, n in sorted(by_project.items()):
        reclaims.add({"project": project}, n, "_total")
    for (project, wf), n in sorted(by_workflow.items()):
        redeliveries.add({"project": project, "workflow": wf}, n, "_total")

    attempts = Family("automation_step_attempts", "counter", "finished step attempts by outcome")
    retries = Family("automation_step_retries", "counter", "step attempts after the first (attempt > 1)")
    comps = Family("automation_compensations", "counter", "compensation attempts by outcome")
    durations = Family("automation_step_duration_seconds", "histogram", "durations of finished step attempts")
    for a in v.attempts:
        labels = {"project": a["project_id"], "workflow": a["workflow_id"], "step": a["step_id"],
                  "kind": a["kind"], "status": a["status"]}
        attempts.add(labels, a["attempts"], "_total")
        if a["retries"]:
            retries.add(labels, a["retries"], "_total")
        if a["kind"] == "compensation":
            comps.add({k: labels[k] for k in ("project", "workflow", "step", "status")}, a["attempts"], "_total")
        for bound, n in zip(v.bounds, a["buckets"]):
            durations.add({**labels, "le": _le(bound)}, n, "_bucket")
        durations.add({**labels, "le": "+Inf"}, a["attempts"], "_bucket")
        durations.add(labels, a["attempts"], "_count")
        durations.add(labels, round(a["seconds"], 6), "_sum")

    breaker = Family("automation_circuit_breaker_state", "gauge", "1 for the state each circuit breaker is in")
    opened = Family("automation_circuit_breaker_opened", "counter", "times each circuit breaker opened")
    for b in v.breakers:
        labels = {"project": b["project_id"], "connector": b["connector_id"]}
        for state in BREAKER_STATES:
            breaker.add({**labels, "state": state}, 1 if b["state"] == state else 0)
        opened.add(labels, b["opened"], "_total")

    paused = Family("automation_flow_paused_keys", "gauge", "flow keys paused now, by an upstream 429 or by hand "
                                                             "(docs/flow.md)")
    pauses = Family("automation_flow_pauses", "counter", "pauses of flow keys begun")
    for f in v.flow:
        paused.add({"project": f["project_id"]}, f["paused"])
        pauses.add({"project": f["project_id"]}, f["pauses"], "_total")

    slots = Family("automation_flow_slots_in_use", "gauge", "slots of a flow limit's keys held now (live holders, "
                   "counted from the runs; docs/flow.md)")
    flow_waiting = Family("automation_flow_waiting", "gauge", "runs parked behind a full key of a flow limit")
    wait_s = Family("automation_flow_wait_seconds", "gauge", "the longest wait (since creation) of a run parked "
                    "behind a flow limit")
    skipped = Family("automation_flow_rate_limited", "counter", "runs a rateLimit skipped (E_FLOW_RATE_LIMITED)")
    for f in v.flow_limits:
        labels = {"project": f["project_id"], "limit": f["limit_id"]}
        if f["limit_id"].startswith("r:"):
            skipped.add(labels, f["skipped"], "_total")
        elif not f["limit_id"].startswith("t:"):
            slots.add(labels, f["in_use"])
            flow_waiting.add(labels, f["waiting"])
            wait_s.add(labels, round(float(f["longest_wait_s"]), 3))
    held = Family("automation_flow_buffered_events", "gauge", "events held in open debounce / batch buffers now")
    opened_buffers = Family("automation_flow_buffers_open", "gauge", "open debounce / batch buffers")
    buffered = Family("automation_flow_events_buffered", "counter", "events that joined a debounce / batch buffer")
    flushes = Family("automation_flow_buffer_flushes", "counter",
                     "debounce / batch buffers flushed into a run, by reason (quiet | maxWait | maxSize | maxBytes)")
    for b in v.buffers:
        labels = {"project": b["project_id"], "workflow": b["workflow_id"]}
        held.add(labels, b["open_events"])
        opened_buffers.add(labels, b["open_buffers"])
        buffered.add(labels, b["events_buffered"], "_total")
        for reason in ("quiet", "maxWait", "maxSize", "maxBytes"):
            flushes.add({**labels, "reason": reason}, b[reason], "_total")

    deliveries = Family("automation_event_deliveries", "counter",
                        "event deliveries recorded, by outcome (filtered: a miss of a trigger that keeps them)")
    for d in v.deliveries:
        deliveries.add({"project": d["project_id"], "trigger": d["trigger_id"], "outcome": d["outcome"]}, d["n"],
                       "_total")

    failed = Family("automation_notifications_failed", "counter",
                    "notifications given up on (state failed, docs/notifications.md): each needs "
                    "`a44 monitor notifications retry ID`")
    pending = Family("automation_notifications_pending", "gauge", "notifications waiting to be delivered")
    for row in v.notifications:
        labels = {"project": row["project_id"], "channel": row["channel"]}
        if row["state"] == "failed":
            failed.add(labels, row["n"], "_total")
        else:
            pending.add(labels, row["n"])
    alerts = Family("automation_alerts_firing", "gauge",
                    "alerts firing, per rule (builtin:* for the built-in alerts) and severity (docs/alerts.md)")
    for a in v.alerts:
        alerts.add({"project": a["project_id"], "rule": a["rule"], "severity": a["severity"]}, a["n"])
    waits_open = Family("automation_waits_open", "gauge", "wait steps open (docs/waits.md), per kind")
    wait_age = Family("automation_oldest_wait_age_seconds", "gauge", "age of the oldest open wait, per kind")
    for w in v.waits:
        labels = {"project": w["project_id"], "kind": w["kind"]}
        waits_open.add(labels, w["open"])
        wait_age.add(labels, round(w["oldest_age_s"], 3))
    overdue = Family("automation_approvals_overdue", "gauge",
                     "open approvals past their first reminder or escalation (docs/approvals.md)")
    for o in v.approvals_overdue:
        overdue.add({"project": o["project_id"]}, o["overdue"])

    lateness = Family("automation_timer_lateness_seconds", "histogram",
                      "how late durable timers fired (fired_at - the due instant stored when the sleep opened)")
    for t in v.timers:
        labels = {"project": t["project_id"], "workflow": t["workflow_id"]}
        for bound, n in zip(system_metrics.TIMER_LATENESS_BOUNDS, t["buckets"]):
            lateness.add({**labels, "le": _le(bound)}, n, "_bucket")
        lateness.add({**labels, "le": "+Inf"}, t["fired"], "_bucket")
        lateness.add(labels, t["fired"], "_count")
        lateness.add(labels, round(t["seconds"], 6), "_sum")

    persisted: dict[str, Family] = {}
    for c in v.counters:     # the in-memory counters of every process, as flushed (names end in _total)
        base = "automation_" + c["name"].removesuffix("_total")
        fam = persisted.get(base)
        if fam is None:
            fam = persisted[base] = Family(base, "counter", HELP.get(c["name"], c["name"]) + " (every process)")
        fam.add(c["labels"], c["value"], "_total")
    return [dlq, age, waiting, runs, reclaims, redeliveries, attempts, retries, comps, durations, breaker, opened,
            paused, pauses, slots, flow_waiting, wait_s, skipped, held, opened_buffers, buffered, flushes, deliveries,
            failed, pending, alerts, waits_open, wait_age, overdue, lateness, *persisted.values()]


def _process(worker: str) -> list[Family]:
    """This process's counters since it started, under their own names (webhook_rejected_total, ...)."""
    fams: dict[str, Family] = {}
    for name, labels, value in COUNTERS.items():
        base = name.removesuffix("_total")
        fam = fams.get(base)
        if fam is None:
            fam = fams[base] = Family(base, "counter", HELP.get(name, name) + " (this process)")
        fam.add({**labels, "worker": worker}, value, "_total")
    return list(fams.values())


def _le(bound: float) -> str:
    return repr(float(bound))


def as_rows(families: list[Family]) -> list[dict]:
    """One row per sample: {name, labels, value} (the CLI's table and JSON)."""
    return [{"name": name, "labels": labels, "value": value}
            for fam in families for name, labels, value in fam.samples]


async def flush_counters(store) -> int:
    """Add this process's counts since the last flush to the totals every process reads."""
    return await system_metrics.flush(store)


class Flusher:
    """Flushes this process's counters every `interval` seconds while it runs, and once more on `stop()` (which must
    come while the store is still open); each flush also folds the finished attempts' deltas into their rollup.
    Started by each HTTP plane, and by a daemon that has none."""

    def __init__(self, store, interval: float = FLUSH_INTERVAL_S):
        self.store, self.interval = store, interval
        self._task: asyncio.Task | None = None

    def start(self) -> Flusher:
        self._task = asyncio.create_task(self._loop())
        return self

    async def _loop(self) -> None:
        while True:
            # wall: how stale another process's view of these in-memory counts may get (and what a crash loses)
            await asyncio.sleep(self.interval)
            await self._flush("metrics flush failed (the counts go with the next one)")

    async def _flush(self, failure: str) -> None:
        began = time.monotonic()
        try:
            wrote = await flush_counters(self.store)
            await system_metrics.fold_attempts(self.store)
        except A44Error as exc:    # the database is away: the counts stay in memory, one line per outage
            if not OUTAGE.failed(self.store.url, "metrics flush", exc):
                log.debug("%s: %s", failure, exc)
        except Exception as exc:  # noqa: BLE001 - a failed flush keeps the counts in memory: it must not stop anything
            log.warning("%s: %s", failure, exc)
        else:
            if wrote:      # nothing to flush reaches no database: it says nothing about an outage
                OUTAGE.ok(self.store.url, began)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._flush("metrics flush at shutdown failed (the last second's counts are lost)")
