"""Samples of the system metrics alert rules name (grammar/alert_rules.METRICS), read with the same queries as
/metrics (queries/metrics.sql) and stored one row per series per interval, so any daemon evaluates a window
whichever daemon sampled it; pruned to the longest window a rule names."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

DLQ = "automation.dlq_depth"
MIN_KEEP = timedelta(hours=1)


def labels_key(labels: dict) -> str:
    """A series' labels as canonical JSON: its identity in samples and an alert's group."""
    return json.dumps(labels, sort_keys=True, separators=(",", ":"))


async def read_series(store, now: datetime, before: dict | None = None) -> list[tuple[str, str, dict, float]]:
    """(project, metric, labels, value) of every series now. A queue whose DLQ emptied drops out of the metrics
    queries; `before` (previous_dlq) gives it one sample at 0, so what watched it sees it clear."""
    queues, runs, projects, overdue = await asyncio.gather(
        store.fetch("metrics_queues", now=now), store.fetch("metrics_runs"), store.fetch("metrics_projects"),
        store.fetch("approvals_overdue_counts", now=now))
    out: list[tuple[str, str, dict, float]] = []
    for q in queues:
        labels = {"queue": q["queue"]}
        out += [(q["project_id"], DLQ, labels, float(q["dlq_depth"])),
                (q["project_id"], "automation.oldest_message_age_seconds", labels, float(q["oldest_age_s"])),
                (q["project_id"], "automation.queue_waiting", labels, float(q["waiting"]))]
    reclaims: dict[str, int] = {r["project_id"]: 0 for r in projects}    # from 0 before a project's first run
    redeliveries: dict[tuple[str, str], int] = {}
    for r in runs:
        out.append((r["project_id"], "automation.runs", {"workflow": r["workflow_id"], "state": r["state"]},
                    float(r["runs"])))
        reclaims[r["project_id"]] = reclaims.get(r["project_id"], 0) + r["lease_reclaims"]
        key = (r["project_id"], r["workflow_id"])
        redeliveries[key] = redeliveries.get(key, 0) + r["redeliveries"]
    present = {(q["project_id"], q["queue"]) for q in queues}
    out += [(p, DLQ, {"queue": q}, 0.0) for (p, q), v in sorted((before or {}).items())
            if v > 0 and (p, q) not in present]
    out += [(p, "automation.lease_reclaim_total", {}, float(n)) for p, n in sorted(reclaims.items())]
    out += [(p, "automation.run_redeliveries_total", {"workflow": wf}, float(n))
            for (p, wf), n in sorted(redeliveries.items())]
    late = {r["project_id"]: float(r["overdue"]) for r in overdue}     # 0 for the others: an alert on it clears
    out += [(p, "automation.approvals_overdue", {}, late.get(p, 0.0))
            for p in sorted({r["project_id"] for r in projects} | set(late))]
    return out


async def previous_dlq(store, now: datetime, interval_s: float) -> dict[tuple[str, str], float]:
    """The DLQ depth of every queue at the last sampling (recent enough to compare with): (project, queue) -> depth."""
    since = now - max(MIN_KEEP, timedelta(seconds=interval_s * 4))    # a restarted daemon compares with it too
    rows = await store.fetch("alert_samples_latest", metric=DLQ, since=since)
    return {(r["project_id"], r["labels"].get("queue")): r["value"] for r in rows}


async def record(store, series: list[tuple[str, str, dict, float]], now: datetime, keep: timedelta) -> None:
    if series:
        await store.execute("alert_samples_add", projects=[s[0] for s in series], metrics=[s[1] for s in series],
                            labels=[labels_key(s[2]) for s in series], values=[s[3] for s in series], at=now)
    await store.execute("alert_samples_prune", before=now - max(keep, MIN_KEEP))
    # an incident (one per cause and channel: one per failed run) is only needed while one of its alerts fires
    await store.execute("alert_incidents_prune", before=now - max(keep, MIN_KEEP))
