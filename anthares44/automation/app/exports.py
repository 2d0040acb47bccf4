"""`runs export`: finished runs of a workflow as histories, one JSON document per run, redacted like results, so a
team can keep real runs as test fixtures (docs/testkit.md "Real runs as fixtures").

A history is `{"run": {...}, "attempts": [...]}`: the run (id, workflow, version, state, trigger, input, result,
error, times) and every attempt in log order (the order of each attempt's first event, what a code workflow's
replay follows: `a44 automation verify`, docs/verify.md; step, kind, attempt, status, error, times, retry and sleep
instants, result, key). Values under sensitive keys become "[redacted]" (redact.py), in the input too, which is
stored as it came.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

from ..redact import redact

RUN_FIELDS = ("run_id", "workflow_id", "version", "state", "trigger_id", "idempotency_key", "partition_key",
              "epoch", "input", "result", "error_code", "error_message", "failed_step", "created_at",
              "started_at", "finished_at")
ATTEMPT_FIELDS = ("step_id", "kind", "attempt", "status", "error_code", "error_message", "started_at",
                  "finished_at", "idempotency_key", "epoch", "worker_id", "retry_at", "due_at")


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


async def export_runs(store, project: str, workflow_id: str, *, since: timedelta, sample: int,
                      states: tuple[str, ...] | None = None) -> AsyncIterator[dict]:
    """Up to `sample` runs of `workflow_id` created within `since` (finished ones, or those in `states`), a random
    sample, oldest first."""
    from ..runtime.store.core import TERMINAL_RUN_STATES

    ids = await store.fetch("runs_export_sample", project=project, workflow_id=workflow_id,
                            since=store.clock.now() - since, states=sorted(states or TERMINAL_RUN_STATES),
                            sample=sample)
    for r in ids:
        run = await store.get_run(r["run_id"], project)
        attempts = []
        rows = [a for epoch in range(run["epoch"] + 1)          # each epoch in log order (a replay opens one)
                for a in await store.fetch("code_attempts_of_run", run_id=r["run_id"], epoch=epoch)]
        for a in map(dict, rows):
            doc = {k: _plain(a.get(k)) for k in ATTEMPT_FIELDS}
            doc["result"] = redact(store.load_result(a))
            attempts.append(doc)
        doc = {k: _plain(run.get(k)) for k in RUN_FIELDS}
        doc["input"], doc["result"] = redact(doc["input"]), redact(doc["result"])
        yield {"run": doc, "attempts": attempts}
