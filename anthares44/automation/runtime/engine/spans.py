"""The spans of one visit of a run (§16, docs/observability.md): the lease grant that started the visit, one span
per attempt that ended during it, and the run's own span when the visit ends the run.

Built only when the engine has a tracer (one read per visit: `trace_context_of_visit`, by the driver as it builds
the visit); with none, the visit's `Batch` holds None and pays one `is None` test per attempt. Spans of attempts are handed over by the `Batch`
when the transaction recording their end has committed: an attempt cut short by a crash gets its span from the
daemon that later finds it interrupted (status `lease_expired`), in the same trace.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from ... import tracing as t
from ...attempts import Attempt
from ..store.core import IDEMPOTENCY_WINDOW

log = logging.getLogger("a44.engine")
FAILED_STATUSES = frozenset({"failed", "timeout", "lease_expired", "compensation_failed"})


class VisitSpans:
    def __init__(self, tracer: t.Tracer, row, worker: str, parent: t.Parent | None):
        self.tracer = tracer
        self.run_id = row["run_id"]
        self.created_at: datetime = row["created_at"]
        self.parent = parent
        self.context = tracer.run_context(self.run_id, parent)
        self.attributes: dict[str, Any] = {
            t.RUN_ID: self.run_id, t.WORKFLOW: row["workflow_id"], t.VERSION: row["version"],
            t.QUEUE: row["queue"] or "q_default", t.EPOCH: row["epoch"], t.WORKER: worker}
        if row["partition_key"] is not None:
            self.attributes[t.PARTITION_KEY] = row["partition_key"]
        self.workflow = row["workflow_id"]
        self._pending: list[tuple] = []

    @classmethod
    async def open(cls, tracer: t.Tracer, store, row, worker: str) -> VisitSpans:
        """Read the run's incoming parent and its grant instants, and emit the lease-grant span."""
        ctx = await store.fetchrow("trace_context_of_visit", run_id=row["run_id"], window=IDEMPOTENCY_WINDOW)
        parent = t.parse_traceparent(ctx["traceparent"], ctx["tracestate"]) if ctx is not None else None
        spans = cls(tracer, row, worker, parent)
        if ctx is not None and ctx["granted_at"] is not None:
            due = ctx["grant_due_at"] or ctx["granted_at"]
            tracer.emit("lease grant", spans.context, min(due, ctx["granted_at"]), ctx["granted_at"],
                        {**spans.attributes, t.LEASE_GRANT: row["lease_grants"]})
        return spans

    def ended(self, a: Attempt, status: str, at: datetime, code: str | None, message: str | None) -> None:
        """An attempt ended (recorded in the batch being built); its span leaves when the batch commits."""
        self._pending.append(("attempt", a.step_id, a.kind, a.attempt, a.started_at, at, status, code, message))

    def run_ended(self, state: str, at: datetime, code: str | None, message: str | None) -> None:
        self._pending.append(("run", None, None, None, self.created_at, at, state, code, message))

    def discard(self) -> None:
        """The batch did not commit: what it recorded did not happen."""
        self._pending.clear()

    def committed(self) -> None:
        pending, self._pending = self._pending, []
        try:
            self._emit(pending)
        except Exception:  # noqa: BLE001 - a tracing bug costs spans, never the run whose batch just committed
            log.warning("spans of run %s were not emitted", self.run_id, exc_info=True)

    def _emit(self, pending: list[tuple]) -> None:
        for what, step_id, kind, attempt, start, end, status, code, message in pending:
            error = (code, message or status) if status in FAILED_STATUSES else None
            attrs = {**self.attributes, t.STATUS: status}
            if code is not None:
                attrs[t.ERROR_CODE] = code
            if what == "run":
                self.tracer.emit(f"run {self.workflow}", self.tracer.parent_context(self.run_id, self.parent),
                                 start, end, attrs, error=error, span_id=t.run_span_id(self.run_id),
                                 trace_id=None if self.parent else t.run_trace_id(self.run_id))
                continue
            attrs.update({t.STEP_ID: step_id, t.ATTEMPT: attempt, t.ATTEMPT_KIND: kind})
            name = f"step {step_id}" if kind == "action" else f"compensate {step_id}"
            self.tracer.emit(name, self.context, start, end, attrs, error=error)
