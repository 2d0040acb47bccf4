"""The DAG strategy: one visit of a YAML workflow's run. Rebuilds where the run stands from the log (`Progress`),
runs the steps that are ready (branches concurrently), records every attempt before and after it runs, and ends
the visit by finishing the run, releasing it to a durable wait (retry delay, sleep), parking it for a person, or
handing it to compensation.

Every decision point commits the visit's one `Batch` (one transaction): finishing step N and starting its
successors commit together. Calls and their records are dag_steps.py, partitions fanout.py, node kinds that call
no connector (a durable `sleep`) the step kinds registered in strategies.py; endings, releases and the saga are
the visit's (visit.py). Time comes from the visit's clock; jitter from its RNG.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from datetime import datetime

from ...attempts import Attempt
from ...clock import wait_until
from ...errors import E_EXCLUSIVE_UNCONFIRMED, E_EXPR_EVAL, E_RUN_DEADLINE, A44Error
from .. import evaluation
from . import children
from . import rows as row_counts
from .dag_steps import Steps
from .fanout import FanOut, failure
from .invoke import Outcome
from .item_plan import item_lists
from .journal import CancelPending
from .progress import Progress, StepProgress
from .saga import DEFAULT_COMPENSATION_TIMEOUT_MS, Saga, Undo
from .states import AWAITING_CONFIRMATION, CANCELLED, COMPENSATING, FAILED, PARTIAL, SLEEPING, SUCCEEDED, WAITING
from .visit import RELEASED, StepKind, Visit

CONDITION_TIMEOUT_MS = 10_000     # an `if:` gets the step's timeout, at most this (a sleep step has none)


async def load_progress(v: Visit) -> Progress:
    """Where the run stands, from its attempt rows of this epoch, completion order, row counts and plans."""
    L, ir = v.lease, v.run.ir
    rows, order, counted, plans, items = [], [], [], [], []
    if L.grant > 1:
        # Only a lease holder writes attempts (a person's confirmation follows a grant too), so a first grant
        # has nothing to read: one round trip and one commit fewer per run.
        async with v.store.transaction("engine_load", session_neutral=True) as conn:
            rows = await conn.fetch("engine_attempts_of_run", run_id=L.run_id, epoch=L.epoch)
            order = [r["step_id"] for r in await conn.fetch("engine_completion_order", run_id=L.run_id,
                                                            epoch=L.epoch)]
            counted = await conn.fetch("step_rows_of_run", run_id=L.run_id)
            if any(n.partitions is not None for n in ir.nodes):
                plans = await conn.fetch("partition_plans_of_run", run_id=L.run_id)
                if any(r["keys"] is None for r in plans):
                    items = await conn.fetch("partition_items_of_run", run_id=L.run_id)
    keys, listed = item_lists(plans, items)
    return Progress(ir, [Attempt.from_row(r, v.store.load_result) for r in rows], order,
                    row_counts.recorded(counted), keys, listed, {r["step_id"]: r["epoch"] for r in plans})


class DagVisit:
    """A `Strategy` (visit.py) for IR kind `workflow`."""

    def __init__(self, v: Visit, p: Progress, kinds: Mapping[str, StepKind]):
        self.v = v
        self.p = p
        self.kinds = kinds                  # node kind -> what runs it instead of a connector (strategies.py)
        self.steps = Steps(v, p)
        self.fan = FanOut(v, p, self.steps)
        self._inflight: dict[asyncio.Task, tuple[Attempt, StepProgress]] = {}
        self._ended = 0

    @classmethod
    async def load(cls, v: Visit, kinds: Mapping[str, StepKind]) -> DagVisit:
        return cls(v, await load_progress(v), kinds)

    # --- Ledger (the saga's questions) ------------------------------------------------------------------------
    def summary(self) -> dict:
        return self.p.summary()

    def latest_finish(self) -> datetime | None:
        return self.p.latest_finish()

    # --- one visit --------------------------------------------------------------------------------------------
    async def visit(self) -> str:
        try:
            return await self._visit()
        finally:
            for t in self._inflight:
                t.cancel()
            if self._inflight:
                await asyncio.gather(*self._inflight, return_exceptions=True)

    async def _visit(self) -> str:
        v, b = self.v, self.v.batch
        now = v.clock.now()
        parked = self._recover_interrupted(now)
        if parked is not None:
            return await self._park(parked, now)
        if v.row["state"] == COMPENSATING:
            failed = self.p.failed_step()
            return await self._saga(failed.node.id if failed else None).run()
        while True:
            now = v.clock.now()
            if await v.cancel.load(v.store, v.lease.run_id):
                if not self._inflight:
                    return await self._cancel(now)
                self._stop_calls()
                await self._await_completions([])
                continue
            if v.stopping() and not self._inflight:
                await b.commit(now)
                return RELEASED         # the driver hands the run back (interpreter.py)
            failure = self.p.failed_step()
            dues: list[tuple[datetime, str]] = []
            starts: list[tuple[Attempt, StepProgress]] = []
            if failure is None and not v.stopping():
                starts = await self._advance(now, dues)
                failure = self.p.failed_step()
                now = v.clock.now()      # steps run on the spot (a `pass` fan-out) took time: the run ends now
            if not self._inflight and not starts:
                if failure is not None:
                    return await self._fail(failure, now)
                if self.p.all_done():
                    return await self._succeed(now)
                return await self._release_until(dues, now)
            await b.commit(now)
            for a, sp in starts:
                self._inflight[asyncio.create_task(self._attempt(a, sp))] = (a, sp)
            await self._await_completions(dues)

    def _recover_interrupted(self, now: datetime) -> StepProgress | None:
        """Actions still `running` when a lease is granted were interrupted (the previous holder died or was cut
        off): they become `lease_expired` and are tried again, unless the step is exclusive (§7.3). A step kind's
        `running` attempt (a sleep) is durable, not interrupted. The saga does the same for compensations."""
        parked = None
        for sp in (*self.p.steps.values(), *self.p.parts.values()):
            a = sp.last
            if a is None or a.status != "running" or sp.node.kind in self.kinds:
                continue
            self.v.batch.expire(a, now)
            self.steps.note_partition(self.v.batch, sp, now)
            if sp.node.exclusive:
                parked = sp
        return parked

    async def _park(self, sp: StepProgress, now: datetime) -> str:
        v, b = self.v, self.v.batch
        err = A44Error(E_EXCLUSIVE_UNCONFIRMED,
                       f"exclusive step {sp.node.id} was interrupted (attempt {sp.last.attempt}); its effect is unknown",
                       step_id=sp.node.id,
                       hint=f"a44 automation runs resolve {v.lease.run_id} --step {sp.node.id} "
                            f"--outcome succeeded|failed|retry")
        b.current_step = sp.node.id
        b.transition(AWAITING_CONFIRMATION, now, release=True, error=err)
        b.event("alert", now, state=AWAITING_CONFIRMATION, step_id=sp.node.id, error_code=err.code,
                message=err.message, data=self._alert_data(sp, err, err.hint))
        await b.commit(now)
        v.event("run.awaiting_confirmation", step=sp.node.id)
        return AWAITING_CONFIRMATION

    def _alert_data(self, sp: StepProgress, err: A44Error, action: str) -> dict:
        L = self.v.lease
        return {"workflow_id": L.workflow_id, "run_id": L.run_id, "failed_step": sp.node.id,
                "error_code": err.code, "error_message": err.message, "attempts": len(sp.actions),
                "compensation_attempts": len(sp.compensations), "recommended_action": action}

    # --- cancel -----------------------------------------------------------------------------------------------
    def _stop_calls(self) -> None:
        """Cancel the in-flight connector calls, except an exclusive step's: its effect may be committed on the
        far side, so its result is awaited and recorded before the run stops."""
        for t, (_, sp) in self._inflight.items():
            if not sp.node.exclusive:
                t.cancel()

    async def _cancel(self, now: datetime) -> str:
        """Nothing is in flight any more: attempts still `running` (a sleep) end `cancelled`; then the run ends
        `cancelled`, or first compensates its completed steps when the request says so."""
        v, b = self.v, self.v.batch
        for sp in (*self.p.steps.values(), *self.p.parts.values()):
            if sp.last is not None and sp.last.status == "running":
                self.steps.cancelled(b, sp.last, sp, now)
        err = v.cancel.error()
        b.current_step = None
        plan = self._plan()
        if v.cancel.compensate and plan:
            return await v.compensate(plan, now, None, err, self)
        # never redelivered nor dead-lettered; wakes its partition's next run
        return await v.end(CANCELLED, now, error=err, summary=self.p.summary())

    # --- choosing what runs next ------------------------------------------------------------------------------
    async def _advance(self, now: datetime, dues: list) -> list[tuple[Attempt, StepProgress]]:
        """Start every step that is ready now; skip those whose `if` is false; let step kinds (a sleep) look at
        theirs; run steps without external effect (`pass`) on the spot. Repeats until nothing changes (a skip, a
        finished sleep or a `pass` step can make successors ready)."""
        v, b, p = self.v, self.v.batch, self.p
        starts: list[tuple[Attempt, StepProgress]] = []
        busy = {sp.key for _, sp in self._inflight.values()}
        if now >= v.run.deadline:
            self._deadline_failure(now, busy)
            return starts
        changed = True
        while changed:
            changed = False
            dues.clear()
            for sid, sp in p.steps.items():
                if sid in busy or sp.done or not p.ready(sid):
                    continue
                st = sp.state
                if st == "failed":
                    return starts
                if st == "retry" and now < sp.last.retry_at:
                    dues.append((sp.last.retry_at, WAITING))
                    continue
                if st == "not_started" and sid not in p.fanout and not await self._condition_holds(sp, now):
                    changed = True
                    continue
                if sp.node.partitions is not None:
                    changed |= await self.fan.advance(b, sp, now, dues, busy, starts)
                    continue
                kind = self.kinds.get(sp.node.kind)
                if kind is not None:
                    looked = kind.advance(v, p, sp, now, dues)
                    changed |= await looked if inspect.isawaitable(looked) else looked
                    continue
                if v.inline(sp.node):
                    await self.steps.run_inline(b, sp, now)
                    changed = True
                    continue
                a = b.start(sid, sp.next_attempt, "action", now)
                p.add(a)
                busy.add(sid)
                starts.append((a, sp))
        return starts

    async def _condition_holds(self, sp: StepProgress, now: datetime) -> bool:
        """Evaluate `if:` off the event loop within the step's timeout; false records a `skipped` attempt, an
        error a final E_EXPR_EVAL failure."""
        if sp.node.condition is None:
            return True
        b = self.v.batch
        timeout_s = min(sp.node.timeout_ms or CONDITION_TIMEOUT_MS, CONDITION_TIMEOUT_MS) / 1000
        try:
            value = await evaluation.evaluate(self.v.program(sp.node), self.steps.cel_scope(sp.node.id), timeout_s)
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

    def _deadline_failure(self, now: datetime, busy: set[str]) -> None:
        """§3.1: past the run's wall-clock limit, the first unfinished step fails with E_RUN_DEADLINE (final)."""
        b = self.v.batch
        for sid, sp in self.p.steps.items():
            if sid in busy or sp.done or not self.p.ready(sid) or sp.state == "failed":
                continue
            err = self.v.deadline_error(sid)
            if sp.state == "running":   # a sleep due at the deadline, or opened before 0032 stored instants
                b.finish(sp.last, "failed", now, error=err)
            else:
                self.p.add(b.record(sid, sp.next_attempt, "action", "failed", now, error=err))
            return

    # --- attempts in flight -----------------------------------------------------------------------------------
    async def _attempt(self, a: Attempt, sp: StepProgress) -> Outcome:
        out = await self.steps.invoke(sp, a.attempt)
        self._ended += 1
        out.seq = self._ended    # completions that land together are recorded in the order they really ended
        return out

    async def _await_completions(self, dues: list) -> None:
        """Wait for the first in-flight attempt to end (or for a retry/sleep of another branch to come due) and
        add what ended to the batch, so that its finish commits with the starts it unlocks."""
        v, b = self.v, self.v.batch
        waits: set[asyncio.Future] = set(self._inflight)
        woken = v.cancel.waiter()       # a cancel request ends the wait too
        if woken is not None:
            waits.add(woken)
        # the due time is an alarm of the visit's clock: a virtual clock moved past it ends the wait at once
        done = await wait_until(v.clock, waits, min(d for d, _ in dues) if dues else None)
        done.discard(woken)
        now = v.clock.now()
        stopped = [t for t in done if t.cancelled()]
        for t in sorted(set(done) - set(stopped), key=lambda t: t.result().seq):
            a, sp = self._inflight.pop(t)
            self.steps.record(b, a, sp, t.result(), now)
        for t in stopped:           # cancelled by _stop_calls: the call was dropped before it answered
            a, sp = self._inflight.pop(t)
            self.steps.cancelled(b, a, sp, now)

    # --- ending a visit ---------------------------------------------------------------------------------------
    async def _release_until(self, dues: list, now: datetime) -> str:
        """Nothing runs now: release the lease until the earliest due time (retry delay or sleep end)."""
        if not dues:
            raise RuntimeError(f"run {self.v.lease.run_id}: nothing runs, nothing is due and the run is not done")
        state = WAITING if any(s == WAITING for _, s in dues) else SLEEPING
        return await self.v.release_until(state, min(d for d, _ in dues), now, lock_waits=self.fan.locks.waits,
                                          timers=any(s == SLEEPING for _, s in dues))

    async def _succeed(self, now: datetime) -> str:
        """Every step is done: `succeeded`, or `partial` when partitions a step accepted losing failed for good
        (the run records which and why)."""
        v = self.v
        result, summary = self.p.sink_outputs(), self.p.summary()
        err = await row_counts.workflow_failure(self.p.ir, summary, result, self.steps.cel_scope(""))
        if err is not None:
            # a workflow expectation over the totals and the result: the run fails (nothing to undo: the data,
            # not an effect, is wrong)
            return await v.end(FAILED, now, error=err, summary=summary, failed=True, code=err.code)
        failed = self.p.failed_partitions()
        try:
            if not failed:
                return await v.end(SUCCEEDED, now, result=result, summary=summary)
            err = failure(None, failed)
            return await v.end(PARTIAL, now, result=result, summary=summary, error=err,
                               event=dict(kind="run.partial", state=PARTIAL, error_code=err.code,
                                          message=err.message, data=err.details))
        except CancelPending:
            # a cancel request reached the run before its end committed, its NOTIFY not yet this driver (0045):
            # the request holds, the run ends cancelled (or compensates first) with the records of this visit
            v.cancel.ask()
            await v.cancel.load(v.store, v.lease.run_id)
            return await self._cancel(v.clock.now())

    async def _fail(self, sp: StepProgress, now: datetime) -> str:
        """Final failure of step `sp`: compensate completed steps if any declare it (§6.1), else fail the run."""
        v, last = self.v, sp.last
        err = A44Error(last.error_code or E_RUN_DEADLINE, last.error_message or "", step_id=sp.node.id)
        v.batch.current_step = sp.node.id
        plan = self._plan()
        if plan:
            return await v.compensate(plan, now, sp.node.id, err, self)
        return await v.end(FAILED, now, failed_step=sp.node.id, error=err, summary=self.p.summary(), failed=True,
                           step=sp.node.id, code=err.code)

    # --- the saga's way back (§6.1) ---------------------------------------------------------------------------
    def _plan(self) -> list[Undo]:
        return [self._undo(sp) for sp in self.p.compensation_plan()]

    def _saga(self, failed_step: str | None) -> Saga:
        return Saga(self.v, self, self._plan(), failed_step)

    def _undo(self, sp: StepProgress) -> Undo:
        node, comp = sp.node, sp.node.compensate
        timeout_ms = comp.timeout_ms or node.timeout_ms or DEFAULT_COMPENSATION_TIMEOUT_MS

        async def call(a: Attempt):
            if node.kind == "child":    # `compensate: workflow/NAME` starts that workflow, once (children.py)
                return await children.compensation(self.v, sp, a)
            return await self.steps.compensation(sp, a, timeout_ms)

        return Undo(node.id, sp, comp.attempts, comp.delays_ms, call, comp.connector.uses)
