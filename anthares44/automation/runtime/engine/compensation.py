"""The saga's way back (§6.1, §6.2): after a step's final failure, undo the completed steps that declare
`compensate`, in reverse completion order, each with its own budget: attempt k waits delays_ms[k-1] (5 s,
20 s, 60 s) after the previous event, as a durable wait (state `compensating`, lease released). A compensation
that spends its budget leaves the run in `compensation_failed` (never cleared automatically) with an alert.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from ...errors import E_COMPENSATION_FAILED, A44Error
from ...redact import redact
from .invoke import Call, invoke
from .journal import Batch
from .progress import StepProgress
from ...compiler.retry_policy import compensation_delay_ms
from .states import COMPENSATING, COMPENSATION_FAILED, FAILED

if TYPE_CHECKING:
    from .interpreter import RunDriver

DEFAULT_COMPENSATION_TIMEOUT_MS = 30_000


class Compensator:
    def __init__(self, driver: "RunDriver", batch: Batch):
        self.d = driver
        self.b = batch
        self.clock = driver.clock

    def _next_target(self) -> StepProgress | None:
        for sp in self.d.p.compensation_plan():
            last = sp.compensations[-1] if sp.compensations else None
            if last is None or last.status != "compensated":
                return sp
        return None

    async def run(self) -> str:
        d, b = self.d, self.b
        while True:
            now = self.clock.now()
            sp = self._next_target()
            if sp is None:
                b.transition(FAILED, now, release=True, summary=d.p.summary(), finished=True)
                d.after_terminal(b, now, failed=True)
                await b.commit(now)
                d.engine.event("run.failed", d.lease.run_id, compensated=True)
                return FAILED
            comp = sp.node.compensate
            last = sp.compensations[-1] if sp.compensations else None
            k = sp.counted_compensation_failures + 1
            if last is not None and last.status == "lease_expired":
                due = now     # interrupted, not failed: try again at once
            else:
                anchor = last.finished_at if last is not None else (d.p.latest_finish() or now)
                due = anchor + timedelta(milliseconds=compensation_delay_ms(comp.delays_ms, k))
            if now < due or d.engine.stopping:
                b.transition(COMPENSATING, now, next_wake_at=due if now < due else now, release=True)
                await b.commit(now)
                d.engine.event("run.compensating", d.lease.run_id, step=sp.node.id, until=due.isoformat())
                return COMPENSATING
            a = b.start(sp.node.id, sp.next_compensation_attempt, "compensation", now)
            d.p.add(a)
            await b.commit(now)
            call = Call(sp.node.id, comp.connector, comp.params,
                        comp.timeout_ms or sp.node.timeout_ms or DEFAULT_COMPENSATION_TIMEOUT_MS, a.attempt,
                        kind="compensation")
            out = await invoke(d.engine.registry, call, d.render_scope(sp.node.id, a.attempt),
                               run_id=d.lease.run_id, project_id=d.lease.project_id,
                               workflow_id=d.lease.workflow_id,
                               idempotency_key=f"{d.lease.run_id}:{sp.node.id}:compensate",
                               services=d.engine.services)
            now = self.clock.now()
            if out.status == "succeeded":
                b.finish(a, "compensated", now, result=redact(out.result))
                d.engine.event("step.compensated", d.lease.run_id, step=sp.node.id, attempt=a.attempt)
                continue
            if k < comp.attempts:
                retry_at = now + timedelta(milliseconds=compensation_delay_ms(comp.delays_ms, k + 1))
                b.finish(a, "failed", now, error=out.error, retry_at=retry_at)
                continue
            b.finish(a, "compensation_failed", now, error=out.error)
            err = A44Error(E_COMPENSATION_FAILED,
                           f"compensation of step {sp.node.id} failed {k} times (last: {out.error.code} "
                           f"{out.error.message})", step_id=sp.node.id)
            row = d.row
            action = (f"undo the effect of step {sp.node.id} of run {d.lease.run_id} by hand (its compensation "
                      f"{comp.connector.uses} kept failing with {out.error.code}); the run stays "
                      f"compensation_failed: list with `a44 automation runs --state compensation_failed`")
            b.transition(COMPENSATION_FAILED, now, release=True, error=err, summary=d.p.summary(), finished=True)
            d.after_terminal(b, now)
            failed = d.p.failed_step()
            data = {"workflow_id": d.lease.workflow_id, "run_id": d.lease.run_id,
                    "failed_step": row["failed_step"] or (failed.node.id if failed else None),
                    "error_code": err.code, "compensation_step": sp.node.id,
                    "compensation_error_code": out.error.code, "attempts": k, "recommended_action": action}
            b.event("alert", now, state=COMPENSATION_FAILED, step_id=sp.node.id, error_code=err.code,
                    message=err.message, data=data)
            await b.commit(now)
            d.engine.event("run.compensation_failed", d.lease.run_id, step=sp.node.id, code=out.error.code)
            return COMPENSATION_FAILED
