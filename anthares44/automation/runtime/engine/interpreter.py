"""Drives one leased run: rebuilds where it stands from the log, runs the steps that are ready (DAG branches
concurrently), records every attempt before and after it runs, and ends each visit by finishing the run,
releasing it to a durable wait (retry delay, sleep), parking it for a person, or handing it to compensation.

Every decision point writes one `Batch` (one transaction): finishing step N and starting its successors
commit together. Time comes from the engine's clock; jitter from its RNG.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ...attempts import Attempt, counts_against_budget
from ...compiler.retry_policy import Failure, retry_delay_ms
from ...errors import E_EXCLUSIVE_UNCONFIRMED, E_EXPR_EVAL, E_RUN_CANCELLED, E_RUN_DEADLINE, A44Error
from ...redact import redact
from .. import evaluation
from ..render import make_scope
from . import rows as row_counts
from .cancel_request import CancelRequest
from .fanout import FanOut, failure
from .invoke import Call, Outcome, invoke
from .journal import Batch, Lease, LeaseLost, attempt_key
from .progress import Progress, StepProgress
from .saga import DEFAULT_COMPENSATION_TIMEOUT_MS, Saga, Undo
from .spans import VisitSpans
from .states import AWAITING_CONFIRMATION, CANCELLED, COMPENSATING, FAILED, PARTIAL, SLEEPING, SUCCEEDED, WAITING

if TYPE_CHECKING:
    from .worker import Engine

log = logging.getLogger("a44.engine")
CONDITION_TIMEOUT_MS = 10_000     # an `if:` gets the step's timeout, at most this (a sleep step has none)


class RunDriver:
    def __init__(self, engine: Engine, row):
        self.engine = engine
        self.clock = engine.clock
        self.row = row
        self.lease = Lease(row["run_id"], row["project_id"], row["workflow_id"], engine.worker_id,
                           row["lease_grants"], row["epoch"])
        self.lost = False
        self.p: Progress | None = None
        self.deadline: datetime = row["deadline_at"]
        self._inflight: dict[asyncio.Task, tuple[Attempt, StepProgress]] = {}
        self._ended = 0
        self.spans = None          # VisitSpans when the engine traces (spans.py)
        self.fan = FanOut(self)
        self.cancel = CancelRequest(row["error_code"] == E_RUN_CANCELLED)    # a person's (cancels.py)

    # --- entry ------------------------------------------------------------------------------------------------
    async def drive(self) -> str:
        """Returns how the visit ended: a run state, 'released' (shutdown) or 'lost' (lease taken away)."""
        task = asyncio.current_task()
        renewer = asyncio.create_task(self._renew(task))
        try:
            if self.engine.tracer is not None:
                self.spans = await VisitSpans.open(self.engine.tracer, self.engine.store, self.row,
                                                   self.engine.worker_id)
            await self._load()
            return await self._visit()
        except LeaseLost:
            self.lost = True
            self.engine.event("lease.lost", self.lease.run_id)
            return "lost"
        except asyncio.CancelledError:
            if self.lost:
                task.uncancel()
                self.engine.event("lease.lost", self.lease.run_id)
                return "lost"
            raise
        finally:
            renewer.cancel()
            self.cancel.close()
            for t in self._inflight:
                t.cancel()
            if self._inflight:
                await asyncio.gather(*self._inflight, return_exceptions=True)

    async def _load(self) -> None:
        store, L = self.engine.store, self.lease
        ir = await self.engine.workflow_ir(L.project_id, L.workflow_id, self.row["version"])
        rows, order, counted, plans = [], [], [], []
        if L.grant > 1:
            # Only a lease holder writes attempts (a person's confirmation follows a grant too), so a first grant
            # has nothing to read: one round trip and one commit fewer per run.
            async with store.transaction("engine_load", session_neutral=True) as conn:
                rows = await conn.fetch("engine_attempts_of_run", run_id=L.run_id, epoch=L.epoch)
                order = [r["step_id"] for r in await conn.fetch("engine_completion_order", run_id=L.run_id,
                                                                epoch=L.epoch)]
                counted = await conn.fetch("step_rows_of_run", run_id=L.run_id)
                if any(n.partitions is not None for n in ir.nodes):
                    plans = await conn.fetch("partition_plans_of_run", run_id=L.run_id)
        self.p = Progress(ir, [Attempt.from_row(r, store.load_result) for r in rows], order,
                          row_counts.recorded(counted), {r["step_id"]: r["keys"] for r in plans})
        # a replayed run (epoch > 0, §13) gets a fresh wall clock: replay wrote its deadline_at from the IR
        self.deadline = self.row["deadline_at"] if L.epoch else \
            min(self.row["deadline_at"], self.row["created_at"] + timedelta(milliseconds=ir.deadline_ms))

    async def _renew(self, driver: asyncio.Task) -> None:
        """Push the lease deadline every lease/3 while the run is driven; a renewal that finds the lease gone
        cancels the driver (it must stop touching the run)."""
        lease_s = self.engine.lease.total_seconds()
        while True:
            await asyncio.sleep(lease_s / 3)
            try:
                ok = await self.engine.store.fetchval("lease_renew", run_id=self.lease.run_id, owner=self.lease.owner,
                                                      grant=self.lease.grant,
                                                      deadline=self.clock.now() + self.engine.lease)
            except A44Error as exc:
                log.warning("lease renewal of %s failed: %s", self.lease.run_id, exc)
                continue
            if ok is None:
                self.lost = True
                driver.cancel()
                return

    def _batch(self) -> Batch:
        return Batch(self.engine.store, self.lease, self.engine.worker_id, self.engine.notifier, self.spans,
                     self.engine.committer)

    # --- cancel -----------------------------------------------------------------------------------------------
    def _stop_calls(self) -> None:
        """Cancel the in-flight connector calls, except an exclusive step's: its effect may be committed on the
        far side, so its result is awaited and recorded before the run stops."""
        for t, (_, sp) in self._inflight.items():
            if not sp.node.exclusive:
                t.cancel()

    def _end_cancelled(self, b: Batch, a: Attempt, sp: StepProgress, now: datetime) -> None:
        b.finish(a, "cancelled", now, error=self.cancel.error(a.step_id))
        self.note_partition(b, sp, now)
        self.engine.event("step.cancelled", self.lease.run_id, step=a.step_id, attempt=a.attempt)

    async def _cancel(self, b: Batch, now: datetime) -> str:
        """Nothing is in flight any more: attempts still `running` (a sleep) end `cancelled`; then the run ends
        `cancelled`, or first compensates its completed steps when the request says so."""
        for sp in (*self.p.steps.values(), *self.p.parts.values()):
            if sp.last is not None and sp.last.status == "running":
                self._end_cancelled(b, sp.last, sp, now)
        err = self.cancel.error()
        b.current_step = None
        if self.cancel.compensate and self.p.compensation_plan():
            b.transition(COMPENSATING, now, error=err)
            self.engine.event("run.compensating", self.lease.run_id, code=err.code)
            return await self._saga(b, None, err).run()
        b.transition(CANCELLED, now, release=True, error=err, summary=self.p.summary(), finished=True)
        self.after_terminal(b, now)     # never redelivered nor dead-lettered; wakes its partition's next run
        await b.commit(now)
        self.engine.event("run.cancelled", self.lease.run_id)
        return CANCELLED

    # --- one visit --------------------------------------------------------------------------------------------
    async def _visit(self) -> str:
        b = self._batch()
        now = self.clock.now()
        parked = self._recover_interrupted(b, now)
        if parked is not None:
            return await self._park(b, parked, now)
        if self.row["state"] == COMPENSATING:
            failed = self.p.failed_step()
            return await self._saga(b, failed.node.id if failed else None).run()
        while True:
            now = self.clock.now()
            if await self.cancel.load(self.engine.store, self.lease.run_id):
                if not self._inflight:
                    return await self._cancel(b, now)
                self._stop_calls()
                await self._await_completions(b, [])
                continue
            if self.engine.stopping and not self._inflight:
                await b.commit(now)
                await self.engine.release(self.lease)
                return "released"
            failure = self.p.failed_step()
            dues: list[tuple[datetime, str]] = []
            starts: list[tuple[Attempt, StepProgress]] = []
            if failure is None and not self.engine.stopping:
                starts = await self._advance(b, now, dues)
                failure = self.p.failed_step()
                now = self.clock.now()      # steps run on the spot (a `pass` fan-out) took time: the run ends now
            if not self._inflight and not starts:
                if failure is not None:
                    return await self._fail(b, failure, now)
                if self.p.all_done():
                    return await self._succeed(b, now)
                return await self._release_until(b, dues, now)
            await b.commit(now)
            for a, sp in starts:
                self._inflight[asyncio.create_task(self._attempt(a, sp))] = (a, sp)
            await self._await_completions(b, dues)

    def _recover_interrupted(self, b: Batch, now: datetime) -> StepProgress | None:
        """Actions still `running` when a lease is granted were interrupted (the previous holder died or was cut
        off): they become `lease_expired` and are tried again, unless the step is exclusive (§7.3). The saga does
        the same for compensations."""
        parked = None
        for sp in (*self.p.steps.values(), *self.p.parts.values()):
            a = sp.last
            if a is None or a.status != "running" or sp.node.kind == "sleep":
                continue
            b.expire(a, now)
            self.note_partition(b, sp, now)
            if sp.node.exclusive:
                parked = sp
        return parked

    async def _park(self, b: Batch, sp: StepProgress, now: datetime) -> str:
        err = A44Error(E_EXCLUSIVE_UNCONFIRMED,
                       f"exclusive step {sp.node.id} was interrupted (attempt {sp.last.attempt}); its effect is unknown",
                       step_id=sp.node.id,
                       hint=f"a44 automation runs resolve {self.lease.run_id} --step {sp.node.id} "
                            f"--outcome succeeded|failed|retry")
        b.current_step = sp.node.id
        b.transition(AWAITING_CONFIRMATION, now, release=True, error=err)
        b.event("alert", now, state=AWAITING_CONFIRMATION, step_id=sp.node.id, error_code=err.code,
                message=err.message, data=self.alert_data(sp, err, err.hint))
        await b.commit(now)
        self.engine.event("run.awaiting_confirmation", self.lease.run_id, step=sp.node.id)
        return AWAITING_CONFIRMATION

    # --- choosing what runs next ------------------------------------------------------------------------------
    async def _advance(self, b: Batch, now: datetime, dues: list) -> list[tuple[Attempt, StepProgress]]:
        """Start every step that is ready now; skip those whose `if` is false; finish sleeps that are over; run
        steps without external effect (`pass`) on the spot. Repeats until nothing changes (a skip, a finished
        sleep or a `pass` step can make successors ready)."""
        starts: list[tuple[Attempt, StepProgress]] = []
        busy = {sp.key for _, sp in self._inflight.values()}
        if now >= self.deadline:
            self._deadline_failure(b, now, busy)
            return starts
        changed = True
        while changed:
            changed = False
            dues.clear()
            for sid, sp in self.p.steps.items():
                if sid in busy or sp.done or not self.p.ready(sid):
                    continue
                st = sp.state
                if st == "failed":
                    return starts
                if st == "retry" and now < sp.last.retry_at:
                    dues.append((sp.last.retry_at, WAITING))
                    continue
                if st == "not_started" and sid not in self.p.fanout and not await self._condition_holds(b, sp, now):
                    changed = True
                    continue
                if sp.node.partitions is not None:
                    changed |= await self.fan.advance(b, sp, now, dues, busy, starts)
                    continue
                if sp.node.kind == "sleep":
                    changed |= self._sleep(b, sp, now, dues)
                    continue
                if self.engine.inline(sp.node):
                    await self.run_inline(b, sp, now)
                    changed = True
                    continue
                a = b.start(sid, sp.next_attempt, "action", now)
                self.p.add(a)
                busy.add(sid)
                starts.append((a, sp))
        return starts

    async def _condition_holds(self, b: Batch, sp: StepProgress, now: datetime) -> bool:
        """Evaluate `if:` off the event loop within the step's timeout; false records a `skipped` attempt, an
        error a final E_EXPR_EVAL failure."""
        if sp.node.condition is None:
            return True
        timeout_s = min(sp.node.timeout_ms or CONDITION_TIMEOUT_MS, CONDITION_TIMEOUT_MS) / 1000
        try:
            value = await evaluation.evaluate(self.engine.program(sp.node), self.cel_scope(sp.node.id), timeout_s)
            if not isinstance(value, bool):
                raise A44Error(E_EXPR_EVAL, f"`if` of step {sp.node.id} gave {type(value).__name__}, not a bool")
        except A44Error as err:
            self.p.add(b.record(sp.node.id, 1, "action", "failed", now, error=err))
            return False
        except Exception as exc:  # EvalError and friends: the expression, not the worker, is at fault
            err = A44Error(E_EXPR_EVAL, f"`if` of step {sp.node.id} ({sp.node.condition.cel}) failed: {exc}",
                           step_id=sp.node.id)
            self.p.add(b.record(sp.node.id, 1, "action", "failed", now, error=err))
            return False
        if value:
            return True
        self.p.add(b.record(sp.node.id, 1, "action", "skipped", now))
        return False

    def _sleep(self, b: Batch, sp: StepProgress, now: datetime, dues: list) -> bool:
        """A durable sleep is a `running` attempt whose end is started_at + sleep_ms; the run is released until
        then. Returns True when the sleep finished now."""
        a = sp.last if sp.state == "running" else None
        if a is None:
            a = b.start(sp.node.id, sp.next_attempt, "action", now)
            self.p.add(a)
        end = a.started_at + timedelta(milliseconds=sp.node.sleep_ms or 0)
        if now >= end:
            b.finish(a, "succeeded", now)
            self.p.finished(a)
            return True
        dues.append((end, SLEEPING))
        return False

    def _deadline_failure(self, b: Batch, now: datetime, busy: set[str]) -> None:
        """§3.1: past the run's wall-clock limit, the first unfinished step fails with E_RUN_DEADLINE (final)."""
        for sid, sp in self.p.steps.items():
            if sid in busy or sp.done or not self.p.ready(sid) or sp.state == "failed":
                continue
            err = A44Error(E_RUN_DEADLINE, f"the run passed its wall-clock limit ({self.deadline.isoformat()}) "
                                           f"before step {sid} finished", step_id=sid)
            if sp.state == "running":   # a sleep that would end after the deadline
                b.finish(sp.last, "failed", now, error=err)
            else:
                self.p.add(b.record(sid, sp.next_attempt, "action", "failed", now, error=err))
            return

    # --- running and recording attempts -----------------------------------------------------------------------
    async def _invoke(self, sp: StepProgress, attempt: int) -> Outcome:
        node = sp.node
        call = Call(sp.key, node.connector, node.params, node.timeout_ms or 0, attempt)
        out = await invoke(self.engine.registry, call, lambda: self.render_scope(node.id, attempt, sp.partition),
                           run_id=self.lease.run_id, project_id=self.lease.project_id,
                           workflow_id=self.lease.workflow_id, idempotency_key=attempt_key(self.lease.run_id, sp.key),
                           services=self.engine.services)
        return await row_counts.measure(node, out, lambda: self.cel_scope(node.id))

    def _note_rows(self, b: Batch, sp: StepProgress, out: Outcome, now: datetime) -> None:
        """A step's (or a partition's) counts, recorded with its attempt; a partitioned step adds its partitions."""
        if out.rows is not None:
            partition = sp.partition or ""
            b.rows(sp.node.id, out.rows, now, partition)
            self.p.record_rows(sp.node.id, out.rows, partition)

    async def run_inline(self, b: Batch, sp: StepProgress, now: datetime) -> None:
        """A step without external effect (`pass`): nothing outside the run can observe it, so it needs no
        `running` row before it runs. It runs now and its one attempt row (started_at = now, finished, result or
        error, retry due time) goes into the batch: it counts as done only when that batch commits, together
        with the transition it belongs to. A crash before the commit leaves no trace; the step simply runs again."""
        node, attempt, key = sp.node, sp.next_attempt, sp.key
        now = self.clock.now()      # its own start: a visit may run thousands of them one after the other
        out = await self._invoke(sp, attempt)
        end = self.clock.now()
        b.current_step = key
        self._note_rows(b, sp, out, end)
        if out.status == "succeeded":
            a = b.record(key, attempt, "action", "succeeded", now, result=redact(out.result), finished_at=end)
            self.p.add(a)
            self.p.finished(a)
            self.note_partition(b, sp, now)
            self.engine.event("step.succeeded", self.lease.run_id, step=key, attempt=attempt)
            return
        err = out.error
        n = sp.counted_failures + (1 if counts_against_budget(out.status, err.code) else 0)
        delay = retry_delay_ms(node.retry, n, Failure.of(err), self.engine.rng)
        retry_at = end + timedelta(milliseconds=delay) if delay is not None else None
        self.p.add(b.record(key, attempt, "action", out.status, now, error=err, retry_at=retry_at,
                            finished_at=end))
        self.note_partition(b, sp, now)
        self.engine.event("step.failed", self.lease.run_id, step=key, attempt=attempt, code=err.code,
                          retry_at=retry_at.isoformat() if retry_at else None)

    def note_partition(self, b: Batch, sp: StepProgress, now: datetime) -> None:
        """A partition's row of run_partitions, with the row counts recorded for it (step_rows: one source)."""
        if sp.partition is not None:
            b.partition(sp, now, self.p.rows.get(sp.node.id, {}).get(sp.partition))

    async def _attempt(self, a: Attempt, sp: StepProgress) -> Outcome:
        out = await self._invoke(sp, a.attempt)
        self._ended += 1
        out.seq = self._ended    # completions that land together are recorded in the order they really ended
        return out

    async def _await_completions(self, b: Batch, dues: list) -> None:
        """Wait for the first in-flight attempt to end (or for a retry/sleep of another branch to come due) and
        add what ended to `b`, so that its finish commits with the starts it unlocks."""
        timeout = None
        if dues:
            timeout = max(0.0, (min(d for d, _ in dues) - self.clock.now()).total_seconds())
        waits = set(self._inflight)
        woken = self.cancel.waiter()       # a cancel request ends the wait too
        if woken is not None:
            waits.add(woken)
        done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        done.discard(woken)
        now = self.clock.now()
        stopped = [t for t in done if t.cancelled()]
        for t in sorted(set(done) - set(stopped), key=lambda t: t.result().seq):
            a, sp = self._inflight.pop(t)
            self._record(b, a, sp, t.result(), now)
        for t in stopped:           # cancelled by _stop_calls: the call was dropped before it answered
            a, sp = self._inflight.pop(t)
            self._end_cancelled(b, a, sp, now)

    def _record(self, b: Batch, a: Attempt, sp: StepProgress, out: Outcome, now: datetime) -> None:
        self._note_rows(b, sp, out, now)
        if out.status == "succeeded":
            b.finish(a, "succeeded", now, result=redact(out.result))
            self.p.finished(a)
            self.note_partition(b, sp, now)
            self.engine.event("step.succeeded", self.lease.run_id, step=a.step_id, attempt=a.attempt)
            return
        err = out.error
        failure = Failure.of(err)
        n = sp.counted_failures + (1 if counts_against_budget(out.status, err.code) else 0)
        delay = retry_delay_ms(sp.node.retry, n, failure, self.engine.rng)
        retry_at = now + timedelta(milliseconds=delay) if delay is not None else None
        b.finish(a, out.status, now, error=err, retry_at=retry_at)
        self.note_partition(b, sp, now)
        self.engine.event("step.failed", self.lease.run_id, step=a.step_id, attempt=a.attempt, code=err.code,
                          retry_at=retry_at.isoformat() if retry_at else None)

    # --- ending a visit ---------------------------------------------------------------------------------------
    async def _release_until(self, b: Batch, dues: list, now: datetime) -> str:
        """Nothing runs now: release the lease until the earliest due time (retry delay or sleep end)."""
        if not dues:
            raise RuntimeError(f"run {self.lease.run_id}: nothing runs, nothing is due and the run is not done")
        wake = min(d for d, _ in dues)
        state = WAITING if any(s == WAITING for _, s in dues) else SLEEPING
        b.transition(state, now, next_wake_at=min(wake, self.deadline), release=True)
        self.fan.locks.before_release(b, now)      # a partition lock freed meanwhile: due at once
        await b.commit(now)
        self.engine.event(f"run.{state}", self.lease.run_id, until=wake.isoformat())
        return state

    async def _succeed(self, b: Batch, now: datetime) -> str:
        """Every step is done: `succeeded`, or `partial` when partitions a step accepted losing failed for good
        (the run records which and why)."""
        result, summary = self.p.sink_outputs(), self.p.summary()
        err = await row_counts.workflow_failure(self.p.ir, summary, result, self.cel_scope(""))
        if err is not None:                       # a workflow expectation over the totals and the result
            return await self._fail_run(b, err, summary, now)
        failed = self.p.failed_partitions()
        state, err = (PARTIAL, failure(None, failed)) if failed else (SUCCEEDED, None)
        b.transition(state, now, release=True, result=result, summary=summary, error=err, finished=True)
        if err is not None:
            b.event("run.partial", now, state=PARTIAL, error_code=err.code, message=err.message, data=err.details)
        self.after_terminal(b, now)
        await b.commit(now)
        self.engine.event(f"run.{state}", self.lease.run_id)
        return state

    async def _fail(self, b: Batch, sp: StepProgress, now: datetime) -> str:
        """Final failure of step `sp`: compensate completed steps if any declare it (§6.1), else fail the run."""
        last = sp.last
        err = A44Error(last.error_code or E_RUN_DEADLINE, last.error_message or "", step_id=sp.node.id)
        b.current_step = sp.node.id
        if self.p.compensation_plan():
            b.transition(COMPENSATING, now, failed_step=sp.node.id, error=err)
            self.engine.event("run.compensating", self.lease.run_id, step=sp.node.id, code=err.code)
            return await self._saga(b, sp.node.id, err).run()
        b.transition(FAILED, now, release=True, failed_step=sp.node.id, error=err, summary=self.p.summary(),
                     finished=True)
        self.after_terminal(b, now, failed=True, error=err)
        await b.commit(now)
        self.engine.event("run.failed", self.lease.run_id, step=sp.node.id, code=err.code)
        return FAILED

    async def _fail_run(self, b: Batch, err: A44Error, summary: dict, now: datetime) -> str:
        """Every step is done but the workflow's `expect:` does not hold: the run fails (nothing to undo: the
        data, not an effect, is wrong)."""
        b.transition(FAILED, now, release=True, error=err, summary=summary, finished=True)
        self.after_terminal(b, now, failed=True, error=err)
        await b.commit(now)
        self.engine.event("run.failed", self.lease.run_id, code=err.code)
        return FAILED

    # --- the saga's way back (§6.1) ---------------------------------------------------------------------------
    def _saga(self, b: Batch, failed_step: str | None, error: A44Error | None = None) -> Saga:
        return Saga(self, b, [self._undo(sp) for sp in self.p.compensation_plan()], failed_step, error)

    def _undo(self, sp: StepProgress) -> Undo:
        node, comp = sp.node, sp.node.compensate

        async def call(a: Attempt):
            c = Call(node.id, comp.connector, comp.params,
                     comp.timeout_ms or node.timeout_ms or DEFAULT_COMPENSATION_TIMEOUT_MS, a.attempt,
                     kind="compensation")
            out = await invoke(self.engine.registry, c, lambda: self.render_scope(node.id, a.attempt),
                               run_id=self.lease.run_id, project_id=self.lease.project_id,
                               workflow_id=self.lease.workflow_id,
                               idempotency_key=f"{self.lease.run_id}:{node.id}:compensate",
                               services=self.engine.services)
            return (out.result, None) if out.status == "succeeded" else (None, out.error)

        return Undo(node.id, sp, comp.attempts, comp.delays_ms, call, comp.connector.uses)

    def summary(self) -> dict:
        return self.p.summary()

    def latest_finish(self) -> datetime | None:
        return self.p.latest_finish()

    def after_terminal(self, b: Batch, now: datetime, *, failed: bool = False, error: A44Error | None = None) -> None:
        """Queues (docs/queues.md): a failed run is redelivered or dead-lettered in the same transaction (at once
        when `error` is permanent); a run of a partition wakes the daemons for its successor (0007 trigger)."""
        if self.row["queue"] is None:
            return
        if failed:
            from ..store.core import RUN_WALL_CLOCK_LIMIT

            permanent = error is not None and not Failure.of(error).retryable
            b.after_failure(now, now + RUN_WALL_CLOCK_LIMIT, permanent=permanent)
        elif self.row["partition_key"] is not None:
            b.wake_partition(now)

    # --- scopes -----------------------------------------------------------------------------------------------
    def _run_info(self, step_id: str, attempt: int) -> dict:
        return {"id": self.lease.run_id, "workflow_id": self.lease.workflow_id,
                "idempotency_key": self.row["idempotency_key"], "attempt": attempt, "step_id": step_id}

    def _trigger(self) -> dict:
        return {"id": self.row["trigger_id"], "event_id": self.row["event_id"],
                "partition_key": self.row["partition_key"]}

    def render_scope(self, step_id: str, attempt: int, partition: str | None = None) -> dict:
        scope = make_scope(input=self.row["input"], steps=self.p.scope_steps(), trigger=self._trigger(),
                           run=self._run_info(step_id, attempt))
        if partition is not None:
            scope["partition"] = partition
        return scope

    def cel_scope(self, step_id: str) -> dict:
        return {"input": self.row["input"], "steps": self.p.scope_steps(), "trigger": self._trigger(),
                "run": {k: v for k, v in self._run_info(step_id, 1).items() if v is not None}}

    def alert_data(self, sp: StepProgress, err: A44Error, action: str) -> dict[str, Any]:
        return {"workflow_id": self.lease.workflow_id, "run_id": self.lease.run_id, "failed_step": sp.node.id,
                "error_code": err.code, "error_message": err.message, "attempts": len(sp.actions),
                "compensation_attempts": len(sp.compensations), "recommended_action": action}
