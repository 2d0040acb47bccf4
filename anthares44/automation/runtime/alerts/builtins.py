"""The built-in alerts, raised without any rule (docs/alerts.md "Built-in alerts"):

- `builtin:run_failed`: a run ended `failed`; grouped by workflow and error code; clears when a run of the
  workflow succeeds. Next action: `a44 automation replay RUN --from-step STEP`.
- `builtin:compensation_failed`: a run ended `compensation_failed`; clears when no run of the workflow is left in
  that state. Next action: undo the step by hand, its attempts in `a44 automation logs RUN`.
- `builtin:awaiting_confirmation`: a run parked on an interrupted exclusive step; clears when none waits.
  Next action: `a44 automation runs resolve RUN --step STEP --outcome succeeded|failed|retry`.
- `builtin:dlq_growth`: a queue's DLQ depth grew since the last sample (one occurrence per new dead letter);
  clears when it is back to 0. Next action: `a44 automation dlq redrive Q --filter "error_code == '...'"`.
"""

from __future__ import annotations

import re
import shlex
from datetime import datetime, timedelta

from . import ledger
from .suppression import Policy

RUN_FAILED, COMPENSATION_FAILED, AWAITING = ("builtin:run_failed", "builtin:compensation_failed",
                                             "builtin:awaiting_confirmation")
DLQ_GROWTH = "builtin:dlq_growth"
RULE_OF_STATE = {"failed": RUN_FAILED, "compensation_failed": COMPENSATION_FAILED,
                 "awaiting_confirmation": AWAITING}
PARKED = {COMPENSATION_FAILED: "compensation_failed", AWAITING: "awaiting_confirmation"}
BATCH = 2000
_SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")
LATE_COMMIT = timedelta(seconds=60)   # how late a run outcome may commit after its timestamp and still be seen


def _project_flag(project: str) -> str:
    return f" --project {shlex.quote(project)}"


def next_action(project: str, state: str, run_id: str, step: str | None) -> str:
    if state == "failed":
        cut = f" --from-step {shlex.quote(step)}" if step else ""
        return f"a44 automation replay {run_id}{cut}{_project_flag(project)}"
    if state == "awaiting_confirmation":
        return (f"a44 automation runs resolve {run_id} --step {shlex.quote(step or '?')} "
                f"--outcome succeeded|failed|retry{_project_flag(project)}")
    return (f"a44 automation logs {run_id}{_project_flag(project)}  # undo step {step}'s effect by hand: "
            "compensation_failed runs are never retried")


def run_context(e) -> dict:
    step = e["step_id"]
    extra = {}
    data = e["alert_data"] or {}      # what the interpreter said when it parked or gave up (engine/saga.py)
    for key in ("compensation_step", "compensation_error_code", "compensation_attempts", "recommended_action"):
        if data.get(key) is not None:
            extra[key] = data[key]
    return {**extra,"title": f"{e['workflow_id']} run {e['state']}: {e['error_code'] or '-'} at step {step or '-'}",
            "workflow": e["workflow_id"], "version": e["version"], "run_id": e["run_id"], "state": e["state"],
            "failed_step": step, "partition_key": e["partition_key"], "queue": e["queue"],
            "error_code": e["error_code"], "error_message": e["error_message"], "attempts": e["attempts"],
            "next_action": next_action(e["project_id"], e["state"], e["run_id"], step),
            "runs_seen": [e["run_id"]], "steps_seen": [step], "partitions_seen": [e["partition_key"]]}


async def run_outcomes(store, now: datetime, horizon: int, holder: str, policy_for, firing: list[dict]) -> int:
    """Turn the run outcomes after `horizon` into alerts and clear on successes; returns how many were read."""
    total, start = 0, horizon
    while True:
        events = await store.fetch("alert_run_outcomes", after=horizon, limit=BATCH)
        for e in events:
            rule = RULE_OF_STATE.get(e["state"])
            if rule is not None:
                alert, msgs = await ledger.record(store, project=e["project_id"], rule=rule,
                                                  group_key=f"{e['workflow_id']}/{e['error_code'] or '-'}",
                                                  policy=policy_for(e["project_id"]), context=run_context(e), now=now,
                                                  event_id=e["id"])
                if alert is not None and any(m.kind == "firing" for m in msgs):
                    firing.append(alert)
                continue
            for a in [a for a in firing if a["project_id"] == e["project_id"] and a["rule"] == RUN_FAILED
                      and a["context"].get("workflow") == e["workflow_id"]]:     # a success clears them
                await ledger.settle(store, a, policy_for(a["project_id"]), now, cleared=True,
                                    context={"resolved_by": e["run_id"]})
                firing.remove(a)
        if events:
            await store.fetch("alert_seen_add", ids=[e["id"] for e in events if e["state"] == "succeeded"])
        total += len(events)
        if len(events) < BATCH:
            break
        horizon = events[-1]["id"]
    # every outcome up to here has been read: later rounds start after it and forget the dedup rows below it
    settled = await store.fetchval("alert_outcome_horizon", after=start, before=now - LATE_COMMIT)
    if settled is not None:
        await store.execute("alert_evaluator_horizon", holder=holder, horizon=settled)
    return total


async def parked_cleared(store, alert: dict) -> bool:
    state = PARKED[alert["rule"]]
    return await store.fetchval("alert_runs_waiting", project=alert["project_id"],
                                workflow=alert["context"].get("workflow"), state=state) == 0


async def dlq_growth(store, now: datetime, before: dict, series, policy_for, firing: list[dict]) -> None:
    """One occurrence per dead letter added since the previous sample; a firing alert clears at depth 0."""
    open_queues = {(a["project_id"], a["group_key"]): a for a in firing if a["rule"] == DLQ_GROWTH}
    for project, metric, labels, depth in series:
        if metric != "automation.dlq_depth":
            continue
        queue = labels["queue"]
        grown = depth - before.get((project, queue), 0.0)
        if grown > 0:
            await ledger.record(store, project=project, rule=DLQ_GROWTH, group_key=queue,
                                policy=policy_for(project), context=await dlq_context(store, project, queue, depth),
                                now=now, n=int(grown))
        elif depth == 0 and (project, queue) in open_queues:
            await ledger.settle(store, open_queues[(project, queue)], policy_for(project), now, cleared=True,
                                context={"dlq_depth": 0})


async def dlq_context(store, project: str, queue: str, depth: float) -> dict:
    d = await store.fetchrow("alert_dead_letter_latest", project=project, queue=queue)
    code = d["error_code"] if d else None
    flt = ""
    if code and _SAFE.match(code):      # as docs/queues.md writes it
        flt = ' --filter "error_code == ' + f"'{code}'" + '"'
    elif code:
        flt = f" --filter {shlex.quote(f'error_code == {code!r}')}"
    ctx = {"title": f"DLQ of {queue} grew to {int(depth)}", "queue": queue, "dlq_depth": int(depth),
           "next_action": f"a44 automation dlq redrive {shlex.quote(queue)}{flt}{_project_flag(project)}"}
    if d is not None:
        ctx.update({"workflow": d["workflow_id"], "run_id": d["run_id"], "dead_letter_id": d["dead_letter_id"],
                    "failed_step": d["step_id"], "partition_key": d["partition_key"], "error_code": code,
                    "error_message": d["error_message"], "attempts": d["attempts"],
                    "runs_seen": [d["run_id"]], "steps_seen": [d["step_id"]],
                    "partitions_seen": [d["partition_key"]]})
    return ctx


def policy_of(policies: dict[str, Policy], default: Policy):
    return lambda project: policies.get(project, default)
