"""The attempts of a DAG run's steps and partitions within one visit: calling the connector (invoke.py) with the
step's template and CEL scopes, and recording the outcome into the visit's batch (result, row counts, the retry
due time from the step's policy, the partition's row), noted in the run's `Progress` as it is written.

A step without external effect (`pass`) runs on the spot (`run_inline`); any other is started by the DAG
strategy (dag_visit.py) and its outcome recorded here when it ends (`record`). The fan-out (fanout.py) starts
partitions through the same two paths.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ...attempts import Attempt, counts_against_budget
from ...compiler.retry_policy import Failure, retry_delay_ms
from ...redact import redact
from ..render import make_scope
from . import rows as row_counts
from .invoke import Call, Outcome, invoke
from .journal import Batch, attempt_key
from .progress import Progress, StepProgress
from .visit import Visit


class Steps:
    """Calls and records the attempts of one DAG run's steps (`p`: where the run stands, kept up to date)."""

    def __init__(self, v: Visit, p: Progress):
        self.v = v
        self.p = p

    # --- scopes -----------------------------------------------------------------------------------------------
    def _run_info(self, step_id: str, attempt: int) -> dict:
        row, L = self.v.row, self.v.lease
        return {"id": L.run_id, "workflow_id": L.workflow_id, "idempotency_key": row["idempotency_key"],
                "attempt": attempt, "step_id": step_id}

    def _trigger(self) -> dict:
        row = self.v.row
        return {"id": row["trigger_id"], "event_id": row["event_id"], "partition_key": row["partition_key"]}

    def render_scope(self, step_id: str, attempt: int, sp: StepProgress | None = None) -> dict:
        scope = make_scope(input=self.v.row["input"], steps=self.p.scope_steps(), trigger=self._trigger(),
                           run=self._run_info(step_id, attempt))
        if sp is not None and sp.partition is not None:
            scope["partition"] = sp.partition
            scope["item"] = sp.item         # a PartProgress: its `foreach` item (else its key)
        return scope

    def cel_scope(self, step_id: str) -> dict:
        return {"input": self.v.row["input"], "steps": self.p.scope_steps(), "trigger": self._trigger(),
                "run": {k: v for k, v in self._run_info(step_id, 1).items() if v is not None}}

    # --- calling ----------------------------------------------------------------------------------------------
    async def invoke(self, sp: StepProgress, attempt: int) -> Outcome:
        node, v, L = sp.node, self.v, self.v.lease
        call = Call(sp.key, node.connector, node.params, node.timeout_ms or 0, attempt)
        out = await invoke(v.registry, call, lambda: self.render_scope(node.id, attempt, sp),
                           run_id=L.run_id, project_id=L.project_id, workflow_id=L.workflow_id,
                           idempotency_key=attempt_key(L.run_id, sp.key), services=v.services)
        return await row_counts.measure(node, out, lambda: self.cel_scope(node.id))

    async def compensation(self, sp: StepProgress, a: Attempt, timeout_ms: int) -> tuple[Any, Any]:
        """Call step `sp`'s `compensate` connector (the saga's `Undo.call`): (result, None) or (None, error)."""
        node, v, L = sp.node, self.v, self.v.lease
        comp = node.compensate
        c = Call(node.id, comp.connector, comp.params, timeout_ms, a.attempt, kind="compensation")
        out = await invoke(v.registry, c, lambda: self.render_scope(node.id, a.attempt), run_id=L.run_id,
                           project_id=L.project_id, workflow_id=L.workflow_id,
                           idempotency_key=f"{L.run_id}:{node.id}:compensate", services=v.services)
        return (out.result, None) if out.status == "succeeded" else (None, out.error)

    # --- recording --------------------------------------------------------------------------------------------
    def note_partition(self, b: Batch, sp: StepProgress, now: datetime) -> None:
        """A partition's row of run_partitions, with the row counts recorded for it (step_rows: one source)."""
        if sp.partition is not None:
            b.partition(sp, now, self.p.rows.get(sp.node.id, {}).get(sp.partition))

    def _note_rows(self, b: Batch, sp: StepProgress, out: Outcome, now: datetime) -> None:
        """A step's (or a partition's) counts, recorded with its attempt; a partitioned step adds its partitions."""
        if out.rows is not None:
            partition = sp.partition or ""
            b.rows(sp.node.id, out.rows, now, partition)
            self.p.record_rows(sp.node.id, out.rows, partition)

    def _retry_at(self, sp: StepProgress, out: Outcome, end: datetime) -> datetime | None:
        """When a failed attempt is tried again (the step's retry policy, §6.3), None when it failed for good."""
        err = out.error
        n = sp.counted_failures + (1 if counts_against_budget(out.status, err.code) else 0)
        delay = retry_delay_ms(sp.node.retry, n, Failure.of(err), self.v.rng)
        return end + timedelta(milliseconds=delay) if delay is not None else None

    def _failed(self, step_id: str, attempt: int, out: Outcome, retry_at: datetime | None) -> None:
        self.v.event("step.failed", step=step_id, attempt=attempt, code=out.error.code,
                     retry_at=retry_at.isoformat() if retry_at else None)

    async def run_inline(self, b: Batch, sp: StepProgress, now: datetime) -> None:
        """A step without external effect (`pass`): nothing outside the run can observe it, so it needs no
        `running` row before it runs. It runs now and its one attempt row (started_at = now, finished, result or
        error, retry due time) goes into the batch: it counts as done only when that batch commits, together
        with the transition it belongs to. A crash before the commit leaves no trace; the step simply runs again."""
        attempt, key = sp.next_attempt, sp.key
        now = self.v.clock.now()      # its own start: a visit may run thousands of them one after the other
        out = await self.invoke(sp, attempt)
        end = self.v.clock.now()
        b.current_step = key
        self._note_rows(b, sp, out, end)
        if out.status == "succeeded":
            a = b.record(key, attempt, "action", "succeeded", now, result=redact(out.result), finished_at=end)
            self.p.add(a)
            self.p.finished(a)
            self.note_partition(b, sp, now)
            self.v.event("step.succeeded", step=key, attempt=attempt)
            return
        retry_at = self._retry_at(sp, out, end)
        self.p.add(b.record(key, attempt, "action", out.status, now, error=out.error, retry_at=retry_at,
                            finished_at=end))
        self.note_partition(b, sp, now)
        self._failed(key, attempt, out, retry_at)

    def record(self, b: Batch, a: Attempt, sp: StepProgress, out: Outcome, now: datetime) -> None:
        """The outcome of started attempt `a`, which just ended."""
        self._note_rows(b, sp, out, now)
        if out.status == "succeeded":
            b.finish(a, "succeeded", now, result=redact(out.result))
            self.p.finished(a)
            self.note_partition(b, sp, now)
            self.v.event("step.succeeded", step=a.step_id, attempt=a.attempt)
            return
        retry_at = self._retry_at(sp, out, now)
        b.finish(a, out.status, now, error=out.error, retry_at=retry_at)
        self.note_partition(b, sp, now)
        self._failed(a.step_id, a.attempt, out, retry_at)

    def cancelled(self, b: Batch, a: Attempt, sp: StepProgress, now: datetime) -> None:
        """Attempt `a` ends with the run (a person's cancel, cancels.py)."""
        b.finish(a, "cancelled", now, error=self.v.cancel.error(a.step_id))
        self.note_partition(b, sp, now)
        self.v.event("step.cancelled", step=a.step_id, attempt=a.attempt)
