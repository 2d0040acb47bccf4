"""The built-in alerts, raised without any rule (docs/alerts.md "Built-in alerts"); what each says is causes.py's:

- `builtin:run_failed`: a run ended `failed`; grouped by workflow and error code; clears when a run of the
  workflow succeeds. Next action: `replay RUN --failed-partitions` when partitions failed, else
  `replay RUN --from-step STEP`.
- `builtin:run_partial`: a run ended `partial` (partitions failed for good, the rest went on); grouped by workflow
  and error code; clears when a run of the workflow succeeds (a person's skip of the last failed partition
  included). Next action: `a44 automation replay RUN --failed-partitions`.
- `builtin:expectation_failed`: a run ended `failed` or `partial` because an `expect:` did not hold (the run's, a
  step's or a partition's); grouped by workflow; clears like run_failed. Its message is the run's incident's.
- `builtin:compensation_failed`: a run ended `compensation_failed`; clears when no run of the workflow is left in
  that state. Next action: undo the step by hand, its attempts in `a44 automation logs RUN`.
- `builtin:awaiting_confirmation`: a run parked on an interrupted exclusive step; clears when none waits.
  Next action: `a44 automation runs resolve RUN --step STEP --outcome succeeded|failed|retry`.
- `builtin:blocked_version`: a code run stopped in `blocked_version` (its code contradicts its history, a deploy
  changed the steps before its frontier: docs/verify.md); names workflow, version and step; clears when no run of the
  workflow is left in that state. Next action: `a44 automation runs migrate ...` or `a44 automation runs cancel RUN`.
- `builtin:dlq_growth`: a queue's DLQ depth grew since the last sample (one occurrence per new dead letter);
  clears when it is back to 0. Next action: `a44 automation dlq redrive Q --filter "error_code == '...'"`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ...errors import E_EXPECTATION_FAILED
from . import ledger
from .causes import dead_letter_causes, dead_letter_context, run_context
from .suppression import Policy

RUN_FAILED, RUN_PARTIAL, EXPECTATION = "builtin:run_failed", "builtin:run_partial", "builtin:expectation_failed"
COMPENSATION_FAILED, AWAITING = "builtin:compensation_failed", "builtin:awaiting_confirmation"
DLQ_GROWTH, BLOCKED = "builtin:dlq_growth", "builtin:blocked_version"
RULE_OF_STATE = {"failed": RUN_FAILED, "partial": RUN_PARTIAL, "compensation_failed": COMPENSATION_FAILED,
                 "awaiting_confirmation": AWAITING, "blocked_version": BLOCKED}
CLEARED_BY_SUCCESS = (RUN_FAILED, RUN_PARTIAL, EXPECTATION)
PARKED = {COMPENSATION_FAILED: "compensation_failed", AWAITING: "awaiting_confirmation",
          BLOCKED: "blocked_version"}
BATCH = 2000
LATE_COMMIT = timedelta(seconds=60)   # how late a run outcome may commit after its timestamp and still be seen


def matched_rules(e, ctx: dict) -> list[tuple[str, str, dict]]:
    """(rule, group, context) of every built-in alert a run outcome matches; the first is the outcome's own."""
    rule = RULE_OF_STATE.get(e["state"])
    if rule is None:
        return []
    out = [(rule, f"{e['workflow_id']}/{e['error_code'] or '-'}", ctx)]
    codes = {e["error_code"]} | {f["error_code"] for f in ctx.get("failed_partitions", [])}
    if e["state"] in ("failed", "partial") and E_EXPECTATION_FAILED in codes:
        out.append((EXPECTATION, e["workflow_id"],
                    {**ctx, "title": f"{e['workflow_id']} run {e['state']}: an expectation did not hold "
                                     f"({ctx['title'].split(': ', 1)[1]})"}))
    return out


async def run_outcomes(store, now: datetime, horizon: int, holder: str, policy_for, firing: list[dict]) -> int:
    """Turn the run outcomes after `horizon` into alerts and clear on successes; returns how many were read."""
    total, start = 0, horizon
    while True:
        events = await store.fetch("alert_run_outcomes", after=horizon, limit=BATCH)
        for e in events:
            matches = matched_rules(e, run_context(e)) if e["state"] != "succeeded" else []
            for i, (rule, group, ctx) in enumerate(matches):
                # the outcome is counted once (alert_seen) by its own rule; the others follow it in one round
                alert, msgs = await ledger.record(store, project=e["project_id"], rule=rule, group_key=group,
                                                  policy=policy_for(e["project_id"]), context=ctx, now=now,
                                                  event_id=e["id"] if i == 0 else None)
                if alert is None and i == 0:
                    break           # seen before (a round cut short): its other rules were recorded with it
                if alert is not None and any(m.kind == "firing" for m in msgs):
                    firing.append(alert)
            if matches:
                continue
            for a in [a for a in firing if a["project_id"] == e["project_id"] and a["rule"] in CLEARED_BY_SUCCESS
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
            ctx = await dead_letter_context(store, project, queue)
            ctx.update(title=f"DLQ of {queue} grew to {int(depth)}", dlq_depth=int(depth),
                       causes=dead_letter_causes(ctx.get("dead_letters", []), int(grown)))
            await ledger.record(store, project=project, rule=DLQ_GROWTH, group_key=queue, policy=policy_for(project),
                                context=ctx, now=now, n=int(grown))
        elif depth == 0 and (project, queue) in open_queues:
            await ledger.settle(store, open_queues[(project, queue)], policy_for(project), now, cleared=True,
                                context={"dlq_depth": 0})


def policy_of(policies: dict[str, Policy], default: Policy):
    return lambda project: policies.get(project, default)
