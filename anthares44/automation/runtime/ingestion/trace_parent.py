"""The trace a run joins (§16, docs/observability.md): the W3C `traceparent` of the request that creates a run is
kept under the run's idempotency key before the run is created, so it is there by the time any daemon can claim
the run; the daemon reads it once per visit, only when it traces. A request without one writes nothing."""

from __future__ import annotations

from datetime import datetime

from ...tracing import Parent
from ..store.core import IDEMPOTENCY_WINDOW


async def record_parent(store, project: str, run_keys: list[str], parent: Parent | None, now: datetime) -> None:
    """Keep `parent` for the runs that `run_keys` create (a retry of the same request within the idempotency
    window keeps the first one, as it gets the first run). One statement, whatever the number of keys."""
    if parent is None or not run_keys:
        return
    await store.execute("trace_context_record", project=project, run_keys=run_keys, now=now,
                        traceparent=parent.traceparent, tracestate=parent.tracestate, window=IDEMPOTENCY_WINDOW)
