"""Drives one leased run of a workflow written in Python (§12; IR kind `code`, sdk/).

Same lease, fence, log, states, retries, sleeps and compensation budget as `RunDriver` (it subclasses it and
reuses its lease renewal and lost-lease handling); what differs is where the steps come from. A visit imports
the function the IR names (refusing changed source), rebuilds the `History` of the run's epoch from its attempt
rows, and calls the function from the top: recorded steps return their results, and the first step without an
outcome is written `running` (committed) before its body runs and finished (committed) before it counts as done.
The visit ends when the function returns (`succeeded`), suspends on a retry delay or a sleep (the run is released
to `waiting` / `sleeping` until then; the coroutine is dropped), fails for good (compensations, in reverse
completion order, 3 attempts 5/20/60 s, each wait durable), or diverges from the log (E_NONDETERMINISTIC_REPLAY:
the run fails, nothing is compensated: the code is not the code that made the log).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ...compiler.ir import COMPENSATION_DELAYS_MS
from ...errors import E_COMPENSATION_FAILED, E_LEASE_EXPIRED, E_RUN_DEADLINE, A44Error
from ...sdk.core import (E_CODE_WORKFLOW, Execution, History, Host, NonDeterministic, Recorded, StepFailed,
                         Suspend, call_user, jsonable)
from ...redact import redact
from .interpreter import RunDriver
from .journal import LeaseLost
from .progress import Attempt
from ...compiler.retry_policy import compensation_delay_ms
from .states import COMPENSATING, COMPENSATION_FAILED, FAILED, SLEEPING, SUCCEEDED, WAITING

COMPENSATION_TIMEOUT_MS = 30_000


class _Infra(BaseException):
    """A database / lease problem raised through user code (which must not be able to swallow it)."""

    def __init__(self, inner: BaseException):
        super().__init__(inner)
        self.inner = inner


class CodeRunDriver(RunDriver, Host):
    # --- loading --------------------------------------------------------------------------------------------
    async def _load(self) -> None:
        store, L = self.engine.store, self.lease
        self.ir = await self.engine.workflow_ir(L.project_id, L.workflow_id, self.row["version"])
        rows = await store.fetch("code_attempts_of_run", L.run_id, L.epoch) if L.grant > 1 else []
        recs = []
        for r in rows:
            result = store.load_result(dict(r)) if r["status"] in ("succeeded", "compensated") else None
            rec = Recorded(r["step_id"], r["kind"], r["attempt"], r["status"], r["started_at"], r["finished_at"],
                           result, r["error_code"], r["error_message"], r["retry_at"])
            rec.handle = Attempt(r["step_id"], r["kind"], r["attempt"], r["status"], r["started_at"])
            recs.append(rec)
        self.history = History.of(recs)
        ms = timedelta(milliseconds=self.ir.deadline_ms)
        self.deadline = self.row["deadline_at"] if L.epoch else min(self.row["deadline_at"], self.row["created_at"] + ms)
        self.b = self._batch()
        self._compensating = self.row["state"] == COMPENSATING

    # --- Host: the execution's durable writes ---------------------------------------------------------------------
    def now(self) -> datetime:
        return self.clock.now()

    def rng(self):
        return self.engine.rng

    async def _commit(self) -> None:
        try:
            await self.b.commit(self.clock.now())
        except (LeaseLost, A44Error) as exc:
            raise _Infra(exc) from exc

    async def start(self, step_id: str, attempt: int) -> Recorded:
        now = self.clock.now()
        if now >= self.deadline:     # §3.1: past the wall-clock limit the next step fails for good
            err = A44Error(E_RUN_DEADLINE, f"the run passed its wall-clock limit ({self.deadline.isoformat()}) "
                                           f"before step {step_id} finished", step_id=step_id)
            self.b.record(step_id, attempt, "action", "failed", now, error=err)
            await self._commit()
            raise StepFailed(step_id, err.code, err.message)
        a = self.b.start(step_id, attempt, "action", now)
        await self._commit()
        self.engine.event("step.started", self.lease.run_id, step=step_id, attempt=attempt)
        return Recorded(step_id, "action", attempt, "running", now, handle=a)

    async def finish(self, rec: Recorded, status: str, *, result: Any = None, error: A44Error | None = None,
                     retry_at: datetime | None = None) -> None:
        now = self.clock.now()
        self.b.current_step = rec.step_id
        self.b.finish(rec.handle, status, now, result=redact(result) if result is not None else None, error=error,
                      retry_at=retry_at)
        await self._commit()
        rec.finished_at = now
        self.engine.event(f"step.{status}", self.lease.run_id, step=rec.step_id, attempt=rec.attempt,
                          code=error.code if error else None)

    def expire(self, rec: Recorded) -> None:
        err = A44Error(E_LEASE_EXPIRED, f"the lease of the worker running attempt {rec.attempt} expired",
                       step_id=rec.step_id)
        self.b.finish(rec.handle, "lease_expired", self.clock.now(), error=err)

    def record_value(self, key: str, value: Any) -> None:
        self.b.record(key, 1, "action", "succeeded", self.clock.now(), result=value)

    # --- the visit ----------------------------------------------------------------------------------------------
    async def _visit(self) -> str:
        from ...sdk.loader import resolve

        L, row = self.lease, self.row
        try:
            wf = resolve(self.ir)      # imported once per process
        except A44Error as err:
            return await self._end(FAILED, error=err)
        x = Execution(wf, self.history, self, run_id=L.run_id, idempotency_key=row["idempotency_key"],
                      input=row["input"])
        try:
            result = await x.run()
        except _Infra as exc:
            raise exc.inner
        except Suspend as s:
            state = WAITING if s.state == "waiting" else SLEEPING
            now = self.clock.now()
            self.b.transition(state, now, next_wake_at=min(s.due, self.deadline), release=True)
            await self.b.commit(now)
            self.engine.event(f"run.{state}", L.run_id, until=s.due.isoformat())
            return state
        except NonDeterministic as err:
            self.b.current_step = err.observed or err.expected
            return await self._end(FAILED, error=err, failed_step=err.observed or err.expected)
        except StepFailed as f:
            return await self._compensate(x, f.step_id, A44Error(f.code, f.message, step_id=f.step_id))
        except Exception as exc:  # noqa: BLE001 - the workflow function itself raised: the run fails
            err = A44Error(E_CODE_WORKFLOW, f"workflow {wf.name} raised {type(exc).__name__}: {exc}")
            return await self._compensate(x, None, err)
        try:
            encoded = jsonable(result)
        except (TypeError, ValueError) as exc:
            return await self._end(FAILED, error=A44Error(E_CODE_WORKFLOW, f"the workflow's result is not JSON: {exc}"))
        return await self._end(SUCCEEDED, result=encoded, x=x)

    def _summary(self, x: Execution | None) -> dict:
        states: dict[str, int] = {}
        attempts = 0
        for sid, log in self.history.steps.items():
            if sid.startswith("ctx.") or log.last is None:
                continue
            states[log.last.status] = states.get(log.last.status, 0) + 1
            attempts += len(log.actions)
        return {"rows_in": None, "rows_out": None, "rows_in_error": None, "steps": states, "attempts": attempts}

    async def _end(self, state: str, *, error: A44Error | None = None, result: Any = None, x=None,
                   failed_step: str | None = None) -> str:
        now = self.clock.now()
        self.b.transition(state, now, release=True, failed_step=failed_step, error=error, result=result,
                          summary=self._summary(x), finished=True)
        # queues, as for YAML runs: a failed run is redelivered or dead-lettered in this transaction, and a run
        # of a partition wakes the daemons for its successor (RunDriver.after_terminal, docs/queues.md)
        self.after_terminal(self.b, now, failed=state == FAILED)
        await self.b.commit(now)
        self.engine.event(f"run.{state}", self.lease.run_id, code=error.code if error else None)
        return state

    # --- the saga's way back (§6.1, §6.2) -------------------------------------------------------------------------
    def _latest_finish(self) -> datetime | None:
        times = [a.finished_at for log in self.history.steps.values() for a in (*log.actions, *log.compensations)
                 if a.finished_at is not None]
        return max(times) if times else None

    async def _compensate(self, x: Execution, step_id: str | None, err: A44Error) -> str:
        plan = [s for s in reversed(x.completed) if s in x.compensators]
        if not plan and not self._compensating:
            return await self._end(FAILED, error=err, failed_step=step_id)
        L, b = self.lease, self.b
        if not self._compensating:
            b.current_step = step_id
            b.transition(COMPENSATING, self.clock.now(), failed_step=step_id, error=err)
            self._compensating = True
            self.engine.event("run.compensating", L.run_id, step=step_id, code=err.code)
        delays = COMPENSATION_DELAYS_MS
        for sid in plan:
            log = self.history.log(sid)
            while True:
                now = self.clock.now()
                last = log.compensations[-1] if log.compensations else None
                if last is not None and last.status == "compensated":
                    break
                if last is not None and last.status == "running":
                    self.expire(last)
                    last.status, last.finished_at = "lease_expired", now
                k = sum(1 for a in log.compensations if a.status in ("failed", "compensation_failed")) + 1
                if last is not None and last.status == "lease_expired":
                    due = now
                else:
                    anchor = last.finished_at if last is not None else (self._latest_finish() or now)
                    due = anchor + timedelta(milliseconds=compensation_delay_ms(delays, k))
                if now < due or self.engine.stopping:
                    b.transition(COMPENSATING, now, next_wake_at=due if now < due else now, release=True)
                    await b.commit(now)
                    self.engine.event("run.compensating", L.run_id, step=sid, until=due.isoformat())
                    return COMPENSATING
                attempt = (last.attempt + 1) if last is not None else 1
                handle = b.start(sid, attempt, "compensation", now)
                await b.commit(now)
                rec = Recorded(sid, "compensation", attempt, "running", now, handle=handle)
                log.compensations.append(rec)
                x.current_step = sid
                try:
                    out = await call_user(x.compensators[sid], COMPENSATION_TIMEOUT_MS)
                    failure = None
                except Exception as exc:  # noqa: BLE001 - the compensation's failure is its outcome
                    from ...sdk.core import as_error
                    _, failure = as_error(exc, sid, COMPENSATION_TIMEOUT_MS)
                finally:
                    x.current_step = None
                now = self.clock.now()
                rec.finished_at = now
                if failure is None:
                    try:
                        res = redact(jsonable(out))
                    except (TypeError, ValueError):
                        res = None
                    b.finish(handle, "compensated", now, result=res)
                    rec.status = "compensated"
                    self.engine.event("step.compensated", L.run_id, step=sid, attempt=attempt)
                    continue
                if k < len(delays):
                    retry_at = now + timedelta(milliseconds=compensation_delay_ms(delays, k + 1))
                    b.finish(handle, "failed", now, error=failure, retry_at=retry_at)
                    rec.status = "failed"
                    continue
                b.finish(handle, "compensation_failed", now, error=failure)
                e = A44Error(E_COMPENSATION_FAILED, f"compensation of step {sid} failed {k} times (last: "
                                                    f"{failure.code} {failure.message})", step_id=sid)
                b.transition(COMPENSATION_FAILED, now, release=True, error=e, summary=self._summary(x), finished=True)
                self.after_terminal(b, now)      # never redelivered (it needs a person); wakes its partition
                b.event("alert", now, state=COMPENSATION_FAILED, step_id=sid, error_code=e.code, message=e.message,
                        data={"workflow_id": L.workflow_id, "run_id": L.run_id,
                              "failed_step": self.row["failed_step"] or step_id, "error_code": e.code,
                              "compensation_step": sid, "compensation_error_code": failure.code, "attempts": k,
                              "recommended_action": f"undo the effect of step {sid} of run {L.run_id} by hand; the "
                                                    f"run stays compensation_failed"})
                await b.commit(now)
                self.engine.event("run.compensation_failed", L.run_id, step=sid, code=failure.code)
                return COMPENSATION_FAILED
        return await self._end(FAILED, error=None if self.row["state"] == COMPENSATING else err,
                               failed_step=step_id)
