"""A person's decision on an approval (§20, docs/approvals.md): `decide(store, project, run, step, person, decision,
comment=..., via=...)`, and what waits for whom (`open_requests`).

One statement (`approval_decide`, migration 0036) locks the run's row, then the request's wait, and settles the
decision against them: a person who decided before gets their first decision back (idempotent); a wait no longer
open, or past its timeout (closed `timed_out` right there: the timeout came first), refuses it (E_APPROVAL_CLOSED);
a person not among the deciders (the members of the step's groups as published now, and of its escalation groups
once it escalated) gets E_NOT_APPROVER; the run's initiator approving gets E_SELF_APPROVAL unless the step allows
it; a one-click link's nonce is consumed with the decision (E_APPROVAL_LINK_USED the second time). An accepted
decision is one row of the append-only audit; a reject, or the `min`-th distinct approval, closes the wait with
the step's output and makes the run due.
"""

from __future__ import annotations

from typing import Any

from ...errors import (
    E_APPROVAL_CLOSED,
    E_APPROVAL_INVALID,
    E_APPROVAL_LINK_USED,
    E_APPROVAL_NOT_FOUND,
    E_NOT_APPROVER,
    E_RUN_NOT_FOUND,
    E_SELF_APPROVAL,
    A44Error,
)

DECISIONS = ("approve", "reject")
VIAS = ("cli", "rest", "link", "console")
MAX_COMMENT = 4000
MAX_PERSON = 200


def check(decision: str, comment: str | None, person: str) -> None:
    if decision not in DECISIONS:
        raise A44Error(E_APPROVAL_INVALID, f"decision {str(decision)[:40]!r} is not approve or reject",
                       hint="--decision approve or --decision reject")
    if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT):
        raise A44Error(E_APPROVAL_INVALID, f"the comment is over {MAX_COMMENT} characters",
                       hint="say the reason in a few lines; link to a document for more")
    if not person or len(person) > MAX_PERSON:
        raise A44Error(E_APPROVAL_INVALID, "the decision has no person (an API token's name, local:<os user>)")


async def decide(store, project: str, run_id: str, step_id: str, person: str, decision: str, *,
                 comment: str | None = None, via: str = "cli", nonce: str | None = None,
                 epoch: int | None = None) -> dict[str, Any]:
    """Returns {run_id, step, person, decision, outcome: recorded | approved | rejected | duplicate, approvals,
    needed}; raises the refusals above. `epoch`: a link's (its request, closed once the run was replayed)."""
    check(decision, comment, person)
    assert via in VIAS
    row = await store.fetchrow("approval_decide", project=project, run_id=run_id, step_id=step_id, person=person,
                               decision=decision, comment=comment or None, via=via, nonce=nonce, epoch=epoch,
                               now=store.clock.now())
    assert row is not None
    outcome = row["outcome"]
    where = f"run {run_id} step {step_id}"
    if outcome == "unknown":
        raise A44Error(E_RUN_NOT_FOUND, f"no run {run_id} in project {project}",
                       hint="`a44 automation approvals` lists what waits for a decision")
    if outcome == "no_request":
        raise A44Error(E_APPROVAL_NOT_FOUND, f"{where} has no approval request (not reached yet, or not an "
                                             "approval step)", hint="`a44 automation runs show RUN` lists its waits")
    if outcome == "closed":
        raise A44Error(E_APPROVAL_CLOSED, f"the approval of {where} is closed ({row['state']})",
                       details={"run_id": run_id, "step": step_id, "state": row["state"]},
                       hint="a decision after the request closed changes nothing")
    if outcome == "not_approver":
        raise A44Error(E_NOT_APPROVER, f"{person} is not among who may decide {where}",
                       hint="`a44 automation runs show RUN` lists who may; the groups are `kind: approvers` files")
    if outcome == "self":
        raise A44Error(E_SELF_APPROVAL, f"{person} started run {run_id} and cannot approve it",
                       hint="another member of the approver groups must approve (the step has no `allowSelf`)")
    if outcome == "link_used":
        raise A44Error(E_APPROVAL_LINK_USED, "this approval link was used already",
                       hint="`a44 automation runs show RUN` shows the decision it recorded")
    return {"run_id": run_id, "step": step_id, "person": person,
            "decision": row["decision"], "outcome": outcome, "approvals": row["approvals"], "needed": row["needed"]}


async def open_requests(store, project: str, *, person: str | None = None, overdue: bool = False,
                        limit: int = 100) -> list[dict[str, Any]]:
    """The open approvals of a project, oldest first: only those `person` may decide and has not (`--mine`),
    only those past their first reminder or escalation (`--overdue`)."""
    rows = await store.fetch("approvals_open", project=project, person=person, overdue=overdue, limit=limit,
                             now=store.clock.now())
    return [dict(r) for r in rows]
