"""The saga's way back (§6.1, §6.2), for both strategies: after a step's final failure, undo the completed steps
that declare a compensation, in reverse completion order, each with its own budget: attempt k waits
delays_ms[k-1] (5 s, 20 s, 60 s) after the previous event, as a durable wait (state `compensating`, lease
released). A compensation found `running` was interrupted, not failed: it is tried again at once. One that
spends its budget leaves the run in `compensation_failed` (never cleared automatically) with an alert.

What differs between the strategies is only how a compensation is called (a connector for YAML, a Python
function for code workflows): each hands the saga a list of `Undo`, and itself as the `Ledger` (summary, latest
finish); the endings are the visit's (visit.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ...attempts import Attempt, StepAttempts
from ...compiler.retry_policy import compensation_delay_ms
from ...errors import E_COMPENSATION_FAILED, E_RUN_CANCELLED, A44Error
from ...redact import redact
from .states import CANCELLED, COMPENSATING, COMPENSATION_FAILED, FAILED

if TYPE_CHECKING:
    from .visit import Ledger, Visit

DEFAULT_COMPENSATION_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Undo:
    """One completed step to compensate: its attempts, its budget, and how to call its compensation (the call
    returns the result, or the error it failed with)."""
    step_id: str
    log: StepAttempts
    attempts: int
    delays_ms: tuple[int, ...]
    call: Callable[[Attempt], Awaitable[tuple[Any, A44Error | None]]]
    what: str                  # the connector or function, for the person the alert asks to step in


class Saga:
    """The way back of one visit: `ledger` is the strategy (its summary, when anything last finished)."""

    def __init__(self, v: Visit, ledger: Ledger, plan: list[Undo], failed_step: str | None,
                 error: A44Error | None = None):
        self.v = v
        self.ledger = ledger
        self.plan = plan
        self.failed_step = failed_step
        # what failed the run: its queue redelivers a transient failure and dead-letters a permanent one at once,
        # compensated or not; a later visit finds it in the run row (the transition to compensating wrote it)
        row = v.row
        self.error = error if error is not None or not row["error_code"] else \
            A44Error(row["error_code"], row["error_message"] or "", step_id=row["failed_step"])
        # a cancel's compensations (cancels.py) end the run `cancelled`: not a failure, never redelivered
        self.cancelled = self.error is not None and self.error.code == E_RUN_CANCELLED

    def _due(self, u: Undo, last: Attempt | None, k: int, now: datetime) -> datetime:
        if last is not None and last.status == "lease_expired":
            return now
        anchor = last.finished_at if last is not None else (self.ledger.latest_finish() or now)
        return anchor + timedelta(milliseconds=compensation_delay_ms(u.delays_ms, k))

    async def run(self) -> str:
        """Compensate what is due; returns the state the visit left the run in."""
        v, b = self.v, self.v.batch
        while True:
            now = v.clock.now()
            u = next((u for u in self.plan if not u.log.compensated), None)
            if u is None:
                return await v.end(CANCELLED if self.cancelled else FAILED, now, summary=self.ledger.summary(),
                                   failed=not self.cancelled, cause=self.error, compensated=True)
            last = u.log.last_compensation
            if last is not None and last.status == "running":
                b.expire(last, now)
            k = u.log.counted_compensation_failures + 1
            due = self._due(u, last, k, now)
            if now < due or v.stopping():
                b.transition(COMPENSATING, now, next_wake_at=due if now < due else now, release=True)
                await b.commit(now)
                v.event("run.compensating", step=u.step_id, until=due.isoformat())
                return COMPENSATING
            a = b.start(u.step_id, u.log.next_compensation_attempt, "compensation", now)
            u.log.add(a)
            await b.commit(now)
            result, error = await u.call(a)
            now = v.clock.now()
            if error is None:
                b.finish(a, "compensated", now, result=redact(result))
                v.event("step.compensated", step=u.step_id, attempt=a.attempt)
                continue
            if k < u.attempts:
                retry_at = now + timedelta(milliseconds=compensation_delay_ms(u.delays_ms, k + 1))
                b.finish(a, "failed", now, error=error, retry_at=retry_at)
                continue
            b.finish(a, "compensation_failed", now, error=error)
            return await self._give_up(u, error, k, now)

    async def _give_up(self, u: Undo, error: A44Error, k: int, now: datetime) -> str:
        v, L = self.v, self.v.lease
        err = A44Error(E_COMPENSATION_FAILED, f"compensation of step {u.step_id} failed {k} times (last: "
                                              f"{error.code} {error.message})", step_id=u.step_id)
        action = (f"undo the effect of step {u.step_id} of run {L.run_id} by hand (its compensation {u.what} kept "
                  f"failing with {error.code}); the run stays compensation_failed: list with "
                  f"`a44 automation runs --state compensation_failed`")
        data = {"workflow_id": L.workflow_id, "run_id": L.run_id,
                "failed_step": v.row["failed_step"] or self.failed_step, "error_code": err.code,
                "compensation_step": u.step_id, "compensation_error_code": error.code, "attempts": k,
                "recommended_action": action}
        alert = dict(kind="alert", state=COMPENSATION_FAILED, step_id=u.step_id, error_code=err.code,
                     message=err.message, data=data)
        # never redelivered (it needs a person); wakes its partition
        return await v.end(COMPENSATION_FAILED, now, error=err, summary=self.ledger.summary(), event=alert,
                           step=u.step_id, code=error.code)
