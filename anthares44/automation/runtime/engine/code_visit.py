"""The code strategy: one visit of a run of a workflow written in Python (§12; IR kind `code`, sdk/).

Same lease, fence, log, states, retries, sleeps and compensation budget as the DAG strategy: the driver
(interpreter.py) keeps the lease, the `Visit` (visit.py) holds the batch and the endings both use, and this
module is the sdk's `Host` (the execution's durable writes); what differs is where the steps come from. A visit imports
the function the IR names (refusing changed source), rebuilds the `History` of the run's epoch from its attempt
rows, and calls the function from the top: recorded steps return their results, and the first step without an
outcome is written `running` (committed) before its body runs and finished (committed) before it counts as done.
The visit ends when the function returns (`succeeded`), suspends on a retry delay or a sleep (the run is released
to `waiting` / `sleeping` until then; the coroutine is dropped), fails for good (compensations, in reverse
completion order, 3 attempts 5/20/60 s, each wait durable), or diverges from the log (E_NONDETERMINISTIC_REPLAY:
the run stops in `blocked_version` with an alert, blocked.py; nothing is compensated: the code is not the code
that made the log; while compensating, the run fails).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import Any

from ...attempts import Attempt, latest_finish
from ...compiler.ir import COMPENSATION_DELAYS_MS
from ...compiler.row_counts import WHOLE_STEP, linear_ancestors, summary_rows
from ...errors import (
    E_CODE_WORKFLOW,
    E_EXPECTATION_FAILED,
    E_PARTITIONS_FAILED,
    E_PARTITIONS_INVALID,
    E_SLEEP_EXCEEDS_RUN_DEADLINE,
    E_STEP_TIMEOUT,
    A44Error,
)
from ...redact import redact
from ...sdk.core import Execution, History, Host, NonDeterministic, StepFailed, Suspend, as_error, call_user, jsonable
from ...stdlib_connectors.protocol import StepContext
from .fanout import PLAN_TRIES
from .invoke import AFTER_EFFECT
from .journal import CancelPending, LeaseLost, PlanConflict, attempt_key
from .partition_locks import LOCK_RECHECK, take_item
from .partition_plan import Planner, since_keys
from .progress import split_part
from .rows import recorded
from .saga import DEFAULT_COMPENSATION_TIMEOUT_MS, Saga, Undo
from .states import CANCELLED, COMPENSATING, FAILED, PARTIAL, SLEEPING, SUCCEEDED, WAITING
from .visit import Visit


class _Infra(BaseException):
    """A database / lease problem raised through user code (which must not be able to swallow it)."""

    def __init__(self, inner: BaseException):
        super().__init__(inner)
        self.inner = inner


class _CancelRun(Exception):
    """A person cancelled the run: the visit stops before the next step and the run ends `cancelled`."""


class CodeVisit(Host):
    """A `Strategy` (visit.py) for IR kind `code`, and the `Host` of the run's `Execution`."""

    def __init__(self, v: Visit, history: History, step_rows: dict[str, dict[str, dict]]):
        self.v = v
        self.history = history
        self.step_rows = step_rows
        self._compensating = v.row["state"] == COMPENSATING
        self._execution: Execution | None = None    # made by `visit` once the workflow function is imported
        self._lock_waits = False        # a `step.map` item was refused its partition's lock in this visit

    @classmethod
    async def load(cls, v: Visit) -> CodeVisit:
        """The run's `History` of this epoch and its recorded row counts (none to read at a first grant)."""
        store, L = v.store, v.lease
        rows = await store.fetch("code_attempts_of_run", run_id=L.run_id, epoch=L.epoch) if L.grant > 1 else []
        history = History.of([Attempt.from_row(r, store.load_result) for r in rows])
        step_rows = recorded(await store.fetch("step_rows_of_run", run_id=L.run_id)) if L.grant > 1 else {}
        return cls(v, history, step_rows)

    # --- Host: the execution's durable writes ---------------------------------------------------------------------
    def now(self) -> datetime:
        return self.v.clock.now()

    def rng(self):
        return self.v.rng

    async def _commit(self) -> None:
        try:
            await self.v.batch.commit(self.v.clock.now())
        except (LeaseLost, A44Error) as exc:
            raise _Infra(exc) from exc

    async def start(self, step_id: str, attempt: int) -> Attempt:
        a = await self._begin(step_id, attempt)
        await self._commit()
        self.v.event("step.started", step=step_id, attempt=attempt)
        return a

    async def _begin(self, step_id: str, attempt: int) -> Attempt:
        """The `running` row of a step's attempt, in the batch (the caller commits); raises at a safe point."""
        v = self.v
        if await v.cancel.load(v.store, v.lease.run_id):
            raise _Infra(_CancelRun())       # a safe point: the step has not started
        now = v.clock.now()
        if now >= v.run.deadline:     # §3.1: past the wall-clock limit the next step fails for good
            err = v.deadline_error(step_id)
            self.v.batch.record(step_id, attempt, "action", "failed", now, error=err)
            await self._commit()
            raise StepFailed(step_id, err.code, err.message)
        split = split_part(step_id)
        if split is not None and (holder := await take_item(v, split[0], split[1], now)) is not None:
            self._lock_waits = True         # one run per partition (partition_locks.py): wait, holding no worker
            self.v.batch.event("partition.waiting", now, step_id=step_id, data={"holder": holder},
                               message=f"run {holder} is processing partition {split[1]} of {split[0]}: waiting for it")
            raise Suspend(now + LOCK_RECHECK, "waiting")
        a = self.v.batch.start(step_id, attempt, "action", now)
        self._item_row(step_id, a, None)
        return a

    async def open_sleep(self, step_id: str, attempt: int, due: datetime | A44Error) -> Attempt:
        v = self.v
        now = v.clock.now()
        err = due if isinstance(due, A44Error) else None
        if isinstance(due, datetime) and due > v.run.deadline:
            err = A44Error(E_SLEEP_EXCEEDS_RUN_DEADLINE, f"sleep {step_id} would end at {due.isoformat()}, past the "
                                                         f"run's deadline ({v.run.deadline.isoformat()})",
                           step_id=step_id, hint="raise the workflow's max_duration or shorten the sleep")
        if err is not None:         # permanent: the step fails now, never cut short nor retried
            v.batch.record(step_id, attempt, "action", "failed", now, error=err)
            await self._commit()
            raise StepFailed(step_id, err.code, err.message)
        a = await self._begin(step_id, attempt)
        assert isinstance(due, datetime)
        v.batch.sleep_open(a, due)          # with its start: one commit, the instant never missing
        await self._commit()
        v.event("step.started", step=step_id, attempt=attempt)
        return a

    async def start_child(self, step_id: str, attempt: int, spec: dict) -> Attempt:
        from . import children

        v = self.v
        c = await children.code_child(v, step_id, spec)
        a = await self._begin(step_id, attempt)
        now = v.clock.now()
        try:
            child_id = await children.create(v, step_id, c, children.check_input(step_id, spec["input"]), a, now)
        except A44Error as err:     # nothing was created: the step fails for good
            v.batch.finish(a, "failed", now, error=err)
            await self._commit()
            raise StepFailed(step_id, err.code, err.message) from None
        if c.wait == "none":
            v.batch.finish(a, "succeeded", now, result={"kind": "child", "run_id": child_id,
                                                        "workflow_id": c.workflow_id, "version": c.version})
            a.status = "succeeded"
        await self._commit()
        v.event("child.started", step=step_id, child=child_id)
        a.result = {"kind": "child", "run_id": child_id, "workflow_id": c.workflow_id, "version": c.version}
        return a

    async def child_outcome(self, step_id: str, a: Attempt, spec: dict) -> Any:
        from . import children

        v = self.v
        if a.status == "succeeded":     # wait="none": finished with its start
            return a.result
        c = await children.code_child(v, step_id, spec)
        now = v.clock.now()
        row = await children.look(v, step_id, c, now)
        if row is None or row["state"] == children.OPEN:
            raise Suspend(row["timeout_at"] if row is not None else now + timedelta(milliseconds=c.timeout_ms),
                          "waiting")
        v.batch.wait_resumed(step_id, now)
        output, error = children.outcome(step_id, c, row)
        if error is not None:
            v.batch.finish(a, "failed", now, error=error)
            await self._commit()
            raise StepFailed(step_id, error.code, error.message)
        v.batch.finish(a, "succeeded", now, result=output)
        await self._commit()
        return output

    async def finish(self, rec: Attempt, status: str, *, result: Any = None, error: A44Error | None = None,
                     retry_at: datetime | None = None, rows: dict | None = None) -> None:
        now = self.v.clock.now()
        self.v.batch.current_step = rec.step_id
        if rows is not None:
            self.v.batch.rows(rec.step_id, rows, now)
            self.step_rows.setdefault(rec.step_id, {})[WHOLE_STEP] = rows
        if status == "succeeded" and rec.due_at is None and rec.kind == "action":
            self._after_effect(rec)
        if rec.due_at is not None and status == "succeeded":
            self.v.batch.sleep_fire(rec, now)   # a timer fires once: only with the instant still the one read
        else:
            self.v.batch.finish(rec, status, now, result=redact(result) if result is not None else None,
                                error=error, retry_at=retry_at)
        self._item_row(rec.step_id, None, rows)
        await self._commit()
        self.v.event(f"step.{status}", step=rec.step_id, attempt=rec.attempt, code=error.code if error else None)

    def _after_effect(self, rec: Attempt) -> None:
        """The test kit's fault point (testkit/faults.py `kill_worker(at="after_effect_before_record")`), as
        invoke.py has it for a connector's call: the step's body returned, nothing of it is recorded yet. Absent in
        production. What it raises leaves through the user's code as itself (_Infra): the visit dies there."""
        fault = self.v.services.get(AFTER_EFFECT)
        if fault is None:
            return
        L = self.v.lease
        ctx = StepContext(run_id=L.run_id, step_id=rec.step_id, attempt=rec.attempt,
                          idempotency_key=attempt_key(L.run_id, rec.step_id), project_id=L.project_id,
                          workflow_id=self.v.row["workflow_id"], deadline=time.monotonic(), services=self.v.services)
        try:
            fault(ctx)
        except Exception as exc:  # noqa: BLE001 - any fault: the worker "dies" with it
            raise _Infra(exc) from exc

    def _item_row(self, step_id: str, starting: Attempt | None, rows: dict | None) -> None:
        """A `step.map` item's row of run_partitions, in the transaction of its attempt (as a YAML partition's),
        so `partitions` lists it and `runs skip` can skip it."""
        split = split_part(step_id)
        if split is None:
            return
        actions = list(self.history.log(step_id).actions) + ([starting] if starting is not None else [])
        ordinal = self._execution.item_ordinals.get(step_id, 0) if self._execution is not None else 0
        self.v.batch.partition_row(split[0], split[1], ordinal, _item_state(actions[-1]), actions, rows,
                                   self.v.clock.now())

    def expire(self, rec: Attempt) -> None:
        self.v.batch.expire(rec, self.v.clock.now())

    def record_value(self, key: str, value: Any) -> None:
        self.v.batch.record(key, 1, "action", "succeeded", self.v.clock.now(), result=value)

    async def plan(self, plan_id: str, name: str, spec: dict, attempt: int) -> Attempt:
        """`ctx.partitions.since_last_success`: the keys, recorded as step `plan_id` with the plan of `name` and
        its pending partition rows in one commit (refused, then computed again, while another run takes a key
        first: the YAML plan's lock and check, partition_plan.py)."""
        await self._commit()             # ctx values this visit drew must not be lost with a refused plan
        planner = Planner(self.v)
        for _ in range(PLAN_TRIES):
            now = self.v.clock.now()
            try:
                day = await planner.logical_day()
                end = spec["to"] or (day - timedelta(days=1)).isoformat()
                keys = since_keys(await planner.history(name), spec["initial"], end, spec["every_ms"], spec["max"],
                                  name)
            except A44Error as err:
                self.v.batch.record(plan_id, attempt, "action", "failed", now, error=err)
                await self._commit()
                raise StepFailed(plan_id, err.code, err.message) from None
            a = self.v.batch.record(plan_id, attempt, "action", "succeeded", now, result=keys)
            self.v.batch.plan(name, json.dumps(spec, sort_keys=True, separators=(",", ":")), keys, True, now)
            for i, key in enumerate(keys):
                self.v.batch.partition_row(name, key, i, "pending", [], None, now)
            try:
                await self.v.batch.commit(now)
            except PlanConflict:
                self.v.event("partitions.replanned", step=name)
                continue
            except (LeaseLost, A44Error) as exc:
                raise _Infra(exc) from exc
            return a
        err = A44Error(E_PARTITIONS_INVALID, f"{name}: other runs kept taking its partitions while it planned",
                       step_id=plan_id, hint="runs of this workflow compete for the same partitions")
        self.v.batch.record(plan_id, attempt, "action", "failed", self.v.clock.now(), error=err)
        await self._commit()
        raise StepFailed(plan_id, err.code, err.message)

    # --- the visit ----------------------------------------------------------------------------------------------
    async def visit(self) -> str:
        from ...sdk.loader import resolve

        v, row = self.v, self.v.row
        try:
            wf = resolve(v.run.ir)      # imported once per process
        except A44Error as err:
            return await self._end(FAILED, error=err)
        x = self._execution = Execution(wf, self.history, self, run_id=v.lease.run_id,
                                        idempotency_key=row["idempotency_key"], input=row["input"])
        try:
            result = await x.run()
        except _Infra as exc:
            if isinstance(exc.inner, _CancelRun):
                return await self._cancelled(x)
            raise exc.inner  # noqa: B904 - the wrapped exception leaves as itself
        except Suspend as s:
            if await v.cancel.load(v.store, v.lease.run_id):
                return await self._cancelled(x)     # instead of a wait: recorded steps replayed, nothing new ran
            state = WAITING if s.state == "waiting" else SLEEPING
            return await v.release_until(state, s.due, v.clock.now(), lock_waits=self._lock_waits,
                                         timers=state == SLEEPING)
        except NonDeterministic as err:
            if not self._compensating:      # the code contradicts the log: stopped, visible, never retried
                from .blocked import block

                return await block(v, err, self.summary())
            self.v.batch.current_step = err.observed or err.expected
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
        if x.failed_items:    # a `step.map(..., on_failure="partial")` let items fail: the run says which
            listed = [{"step": i[:-1].split("[", 1)[0], "partition": i[:-1].split("[", 1)[1], "error_code": c,
                       "error_message": m} for i, c, m in x.failed_items]
            err = A44Error(E_PARTITIONS_FAILED, f"{len(listed)} partition(s) failed after their retries: "
                                                + ", ".join(f"{i} ({c})" for i, c, _ in x.failed_items),
                           details={"failed_partitions": listed})
            return await self._finish(x, PARTIAL, error=err, result=encoded,
                                      event=dict(kind="run.partial", state=PARTIAL, error_code=err.code,
                                                 message=err.message, data=err.details))
        return await self._finish(x, SUCCEEDED, result=encoded)

    async def _finish(self, x: Execution, state: str, **end: Any) -> str:
        """End the run succeeded or partial; a cancel request that reached the run before this commit, its NOTIFY
        not yet this driver (migration 0045), ends it cancelled instead, with the records of this visit."""
        try:
            return await self._end(state, **end)
        except CancelPending:
            self.v.cancel.ask()
            await self.v.cancel.load(self.v.store, self.v.lease.run_id)
            return await self._cancelled(x)

    def summary(self) -> dict:
        """As for YAML runs (Progress.summary): the steps' recorded rows, added up in the order the code asked
        for the steps, plus step and attempt counts."""
        states: dict[str, int] = {}
        attempts = 0
        counted = []
        for sid, log in self.history.steps.items():
            if sid.startswith("ctx.") or log.last is None:
                continue
            last = log.last
            states[last.status] = states.get(last.status, 0) + 1
            attempts += len(log.actions)
            if last.status == "succeeded" or last.error_code == E_EXPECTATION_FAILED:
                counted.append(sid)
        summary = summary_rows(self.step_rows, counted, linear_ancestors(counted))
        summary.update(steps=states, attempts=attempts)
        return summary

    async def _end(self, state: str, *, error: A44Error | None = None, result: Any = None,
                   failed_step: str | None = None, event: dict[str, Any] | None = None) -> str:
        # queues, as for YAML runs: a failed run is redelivered or dead-lettered in this transaction, and a run
        # of a partition wakes the daemons for its successor (Visit.after_terminal, docs/queues.md)
        return await self.v.end(state, self.v.clock.now(), summary=self.summary(), error=error, result=result,
                                failed_step=failed_step, failed=state == FAILED, code=error.code if error else None,
                                event=event)

    async def _cancelled(self, x: Execution) -> str:
        """End the run `cancelled` (cancels.py), compensating its completed steps first when asked."""
        v = self.v
        err = v.cancel.error()
        now = v.clock.now()
        for log in self.history.steps.values():      # a sleep in progress ends with the run
            if log.last is not None and log.last.status == "running":
                self.v.batch.finish(log.last, "cancelled", now, error=err)
        plan = self._plan(x)
        if v.cancel.compensate and plan:
            self._compensating = True
            return await v.compensate(plan, v.clock.now(), None, err, self, announce=False)
        return await self._end(CANCELLED, error=err)

    # --- the saga's way back (§6.1, §6.2) -------------------------------------------------------------------------
    def latest_finish(self) -> datetime | None:
        return latest_finish(self.history.steps.values())

    def _undo(self, x: Execution, sid: str) -> Undo:
        fn = x.compensators[sid]

        async def call(a: Attempt):
            x.current_step = sid
            try:
                out = await call_user(fn, DEFAULT_COMPENSATION_TIMEOUT_MS)
            except Exception as exc:  # noqa: BLE001 - the compensation's failure is its outcome
                return None, as_error(exc, sid, DEFAULT_COMPENSATION_TIMEOUT_MS)[1]
            finally:
                x.current_step = None
            try:
                return jsonable(out), None
            except (TypeError, ValueError):
                return None, None

        what = getattr(fn, "__qualname__", None) or repr(fn)
        return Undo(sid, self.history.log(sid), len(COMPENSATION_DELAYS_MS), COMPENSATION_DELAYS_MS, call, what)

    def _plan(self, x: Execution) -> list[Undo]:
        return [self._undo(x, s) for s in reversed(x.completed) if s in x.compensators]

    async def _compensate(self, x: Execution, step_id: str | None, err: A44Error) -> str:
        plan = self._plan(x)
        if self._compensating:      # a later visit of the way back
            return await Saga(self.v, self, plan, step_id, err).run()
        if not plan:
            return await self._end(FAILED, error=err, failed_step=step_id)
        self.v.batch.current_step = step_id
        self._compensating = True
        return await self.v.compensate(plan, self.v.clock.now(), step_id, err, self)


def _item_state(last: Attempt) -> str:
    """A map item's partition state after its latest attempt (docs/partitions.md's states)."""
    if last.status in ("running", "succeeded", "skipped"):
        return {"running": "running", "succeeded": "success", "skipped": "skipped"}[last.status]
    if last.status == "lease_expired" or last.retry_at is not None:
        return "retrying"
    return "timeout" if last.status == "timeout" or last.error_code == E_STEP_TIMEOUT else "failed"

