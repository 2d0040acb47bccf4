"""Helpers of the debounce / batch tests: workflows, publishing events with a given occurred_at on the kit's
clock, reading buffers and the runs their flushes started."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from anthares44.automation.jsonenc import iso
from anthares44.automation.runtime.ingestion.bus import publish_event


def debounce_wf(name: str = "doc-sync", *, key: str | None = "input.docId", quiet: str = "2s",
                max_wait: str | None = None, deliver: str = "all", event: str = "doc.changed") -> str:
    fields = [f"quiet: {quiet}", f"deliver: {deliver}"] + ([f"maxWait: {max_wait}"] if max_wait else [])
    return _wf(name, event, _flow("debounce", key, fields))


def batch_wf(name: str = "tenant-batch", *, key: str | None = "input.tenantId", max_size: int = 100,
             max_wait: str = "5s", max_bytes: str | None = None, event: str = "order.placed") -> str:
    fields = [f"maxSize: {max_size}", f"maxWait: {max_wait}"] + ([f"maxBytes: {max_bytes}"] if max_bytes else [])
    return _wf(name, event, _flow("batch", key, fields))


def _flow(kind: str, key: str | None, fields: list[str]) -> str:
    return kind + ": {" + ", ".join(([f'key: "{key}"'] if key is not None else []) + fields) + "}"


def _wf(name: str, event: str, flow: str) -> str:
    return f"""
name: {name}
version: 1
trigger: {{event: {event}}}
{flow}
steps:
  - id: take
    uses: pass
    timeout: 5s
    output: "{{{{ input }}}}"
"""


def send(env, type: str, data: Any, key: str, *, occurred_at: datetime | None = None, event_id: str | None = None):
    """Publish one event on the bus at the kit's current instant (no settle)."""
    return env.call(publish_event(env.store, env.project, type, data, key, occurred_at=occurred_at,
                                  event_id=event_id))


def rows(env, sql: str, *args) -> list[dict]:
    async def go():
        async with env.store.pool.acquire() as conn:
            return [dict(r) for r in await conn.fetch(sql, *args)]
    return env.call(go())


def buffers(env) -> list[dict]:
    return rows(env, "select * from automation.flow_buffers order by first_at, buffer_id")


def runs_of(env, workflow: str) -> list[dict]:
    return rows(env, "select run_id, input, event_id, trigger_id, idempotency_key, state, created_at "
                     "from automation.runs where workflow_id = $1 order by created_at, run_id", workflow)


__all__ = ["batch_wf", "buffers", "debounce_wf", "iso", "rows", "runs_of", "send"]
