"""What the buffers hold, for people (§22): the open buffers of a project (`flow buffers`, `GET /flow/buffers`),
the events a run carries (`runs show`, `GET /runs/{id}`: `carried`), and the metrics read from the table at scrape
time (`automation_flow_buffer_*`), so they need no counter that could drift from the rows."""

from __future__ import annotations

from typing import Any

from ...jsonenc import iso

CARRIED_LIMIT = 1000        # the events of a run listed by `runs show`; `count` says how many there were


async def open_buffers(store, project: str, workflow_id: str | None = None, limit: int = 1000) -> list[dict]:
    """The open buffers, oldest first: workflow, kind, key, events, bytes, first/last event, due (and why)."""
    rows = await store.fetch("flow_buffers_open", project=project, workflow_id=workflow_id, limit=limit)
    return [{"buffer_id": r["buffer_id"], "workflow_id": r["workflow_id"], "kind": r["kind"], "key": r["buffer_key"],
             "deliver": r["deliver"], "events": r["events"], "bytes": r["bytes"], "first_at": iso(r["first_at"]),
             "last_at": iso(r["last_at"]), "due_at": iso(r["due_at"]),
             "due_for": "maxWait" if r["due_at"] >= r["max_due_at"] else "quiet"} for r in rows]


async def carried(store, run_id: str, limit: int = CARRIED_LIMIT) -> dict[str, Any] | None:
    """The buffer whose flush started `run_id` and its events in occurred_at order (None: it carries none)."""
    buf = await store.fetchrow("flow_buffer_of_run", run_id=run_id)
    if buf is None:
        return None
    events = await store.fetch("flow_buffer_carried", buffer_id=buf["buffer_id"], limit=limit)
    return {"buffer_id": buf["buffer_id"], "kind": buf["kind"], "key": buf["buffer_key"], "deliver": buf["deliver"],
            "reason": buf["flush_reason"], "count": buf["events"], "bytes": buf["bytes"],
            "first_at": iso(buf["first_at"]), "flushed_at": iso(buf["flushed_at"]),
            "events": [{"event_id": e["event_id"], "type": e["type"], "idempotency_key": e["idempotency_key"],
                        "trigger_id": e["trigger_id"], "occurred_at": iso(e["occurred_at"]),
                        "received_at": iso(e["received_at"])} for e in events]}
