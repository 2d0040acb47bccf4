"""The `approval` step of a YAML workflow (§20, node kind `approval`, docs/approvals.md): a step kind (visit.py
`StepKind`) that waits for people to decide, holding no worker, lease or slot meanwhile.

The request is a wait (`run_waits`, kind `approval`) with its request row beside it (`approval_requests`, migration
0036). The first look opens both (`approval_open`, idempotent: the row of the first open keeps its instants). While
it stays open the visit enqueues the messages whose instant has come (the request at once, each reminder, the
escalation: runtime/approvals/notices.py, once each by their idempotency keys) and releases the run to `waiting`
until the next of them or the timeout; the release's `engine_op_wait_check` (migration 0033) makes the run due at
once if a decision closed the request in between. A decision (runtime/approvals/decisions.py) closes the wait
itself and makes the run due. The look at or after the timeout closes it `timed_out` unless a decision closed it
first (`wait_timeout`, one conditional update, as a decision's timeout check is): one outcome. The step finishes
from the row's outcome in the commit that marks the wait resumed: approved (output: the decision and the approvers),
rejected (E_APPROVAL_REJECTED, not retried), or timed out per `onTimeout`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ...errors import E_APPROVAL_REJECTED, E_RUN_CANCELLED, E_WAIT_TIMEOUT, A44Error
from ..approvals import links, notices
from .progress import Progress, StepProgress
from .states import WAITING
from .visit import Visit

OPEN, SATISFIED, TIMED_OUT, CANCELLED = "open", "satisfied", "timed_out", "cancelled"


def _ms(at: datetime, ms: int) -> datetime:
    return at + timedelta(milliseconds=ms)


class Approval:
    """`StepKind` of node kind `approval`."""

    async def advance(self, v: Visit, p: Progress, sp: StepProgress, now: datetime,
                      dues: list[tuple[datetime, str]]) -> bool:
        b, L, ap = v.batch, v.lease, sp.node.approval
        assert ap is not None
        a = sp.last if sp.state == "running" else None
        if a is None:
            a = b.start(sp.node.id, sp.next_attempt, "action", now)
            p.add(a)
        t0 = a.started_at
        row = await v.store.fetchrow(
            "approval_open", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id, groups=list(ap.groups),
            escalate_groups=list(ap.escalate_groups), min=ap.min, allow_self=ap.allow_self, notify=ap.notify,
            timeout_at=_ms(t0, ap.timeout_ms),
            escalate_at=None if ap.escalate_after_ms is None else _ms(t0, ap.escalate_after_ms),
            remind_at=[_ms(t0, ms) for ms in ap.remind_ms], now=now)
        assert row is not None
        if row["state"] == OPEN and now >= row["timeout_at"]:
            row = await v.store.fetchrow("wait_timeout", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id, now=now)
            assert row is not None
        if row["state"] != OPEN:
            self._finish(v, p, sp, a, row["state"], row["output"], now)
            return True
        # the instants are the first open's (a retried or taken-over visit never moves them)
        opened, timeout_at = row["opened_at"], row["timeout_at"]
        timers = [("request", opened)] + [(f"remind:{i + 1}", _ms(opened, ms)) for i, ms in enumerate(ap.remind_ms)]
        if ap.escalate_after_ms is not None:
            timers.append(("escalation", _ms(opened, ap.escalate_after_ms)))
        for which, at in timers:
            if at <= now and ap.notify is not None:
                sent = await notices.send(v.store, str(v.row["project_id"]), ap.notify, run_id=L.run_id,
                                          epoch=L.epoch, step_id=sp.node.id, workflow=str(v.row["workflow_id"]),
                                          which=which, timeout_at=timeout_at, now=now,
                                          public_url=v.services.get(links.PUBLIC_URL))
                if sent is not None:
                    v.event(f"approval.{which.split(':')[0]}", step=sp.node.id, at=at.isoformat())
        later = [at for _, at in timers if at > now]
        dues.append((min([*later, timeout_at]), WAITING))
        return False

    def _finish(self, v: Visit, p: Progress, sp: StepProgress, a: Any, state: str, output: Any,
                now: datetime) -> None:
        b, ap = v.batch, sp.node.approval
        assert ap is not None
        b.wait_resumed(sp.node.id, now)
        out = output if isinstance(output, dict) else {}
        if state == SATISFIED and out.get("decision") == "approve":
            b.finish(a, "succeeded", now, result=output)
            v.event("approval.approved", step=sp.node.id)
        elif state == SATISFIED:
            b.finish(a, "failed", now, error=A44Error(
                E_APPROVAL_REJECTED, f"step {sp.node.id} was rejected by {out.get('by')}", step_id=sp.node.id,
                details={"decision": out}, hint="the audit is in `a44 automation runs show RUN`"))
            v.event("approval.rejected", step=sp.node.id)
        elif state == TIMED_OUT and ap.on_timeout == "continue":
            b.finish(a, "succeeded", now, result={"kind": "approval", "decision": "timeout"})
            v.event("approval.timed_out", step=sp.node.id)
        elif state == CANCELLED:    # closed by its run ending meanwhile (a cancel, the deadline)
            b.finish(a, "failed", now, error=A44Error(E_RUN_CANCELLED, f"the approval of step {sp.node.id} was "
                                                                       "closed: its run is ending", step_id=sp.node.id))
        else:
            code = E_APPROVAL_REJECTED if ap.on_timeout == "reject" else E_WAIT_TIMEOUT
            b.finish(a, "failed", now, error=A44Error(
                code, f"step {sp.node.id} waited {ap.timeout_ms} ms for {ap.min} approval(s); its timeout came first",
                step_id=sp.node.id, hint="raise the approval's `timeout`, add reminders or an escalation, or take "
                                         "`onTimeout: continue`"))
            v.event("approval.timed_out", step=sp.node.id)
        p.finished(a)
