"""The built-in alert `builtin:approval_overdue` (docs/approvals.md): raised without any rule while a project has
open approvals past their first reminder (or their escalation), one occurrence per sample with how many; it clears
when none is overdue. Routed and suppressed like the other built-in alerts (the project's `builtin` policy).
Next action: `a44 automation approvals --overdue`."""

from __future__ import annotations

from datetime import datetime

from . import ledger

RULE = "builtin:approval_overdue"
METRIC = "automation.approvals_overdue"


async def check(store, now: datetime, series, policy_for, firing: list[dict]) -> None:
    raised = {a["project_id"]: a for a in firing if a["rule"] == RULE}
    for project, metric, _labels, value in series:
        if metric != METRIC:
            continue
        if value > 0:
            n = int(value)
            await ledger.record(store, project=project, rule=RULE, group_key="approvals", policy=policy_for(project),
                                context={"title": f"{n} approval(s) overdue", "count": n,
                                         "next_action": "a44 automation approvals --overdue"}, now=now)
        elif project in raised:
            await ledger.settle(store, raised[project], policy_for(project), now, cleared=True,
                                context={"count": 0})
