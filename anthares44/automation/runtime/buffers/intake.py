"""An event joins its buffer (§22), inside the caller's ingestion transaction (the bus's `_deliver`, a buffered
webhook, an envelope delivered to a workflow), so the envelope, its delivery record and its place in the buffer
commit together.

`join` takes the open buffer of (workflow, kind, key) with its row lock (`flow_buffer_open`: opened now when none
is), puts the envelope in it and moves its due instant; the flusher closes it when that instant comes. Inline
flushes, under the same lock: a batch the event fills (`maxSize` events) starts its run at once, so no batch ever
holds one more; an event that would take a batch past `maxBytes` first starts the run of the batch before it, then
opens the next (an envelope bigger than `maxBytes` alone is a batch of one, never refused). A debounce is capped
the same way at 10,000 events or 10 MB (compiler/models/flow_buffers.py), so an endless burst still starts runs.

An event already in a buffer of the workflow (its id) is not added again: `deduplicated`, naming that buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..ingestion.ids import new_id
from ..store.results import encode_json
from .flush import flush


class KeyHeld(Exception):
    """The request's idempotency key was claimed by an earlier one within 24 h: the caller rolls its whole
    transaction back (nothing of this request is kept) and answers with that one's buffer."""


async def claim(conn, project: str, key: str, buffer_id: str, event_id: str, now: datetime) -> None:
    """Claim idempotency key `key` (`<trigger>:<key>` of a webhook or an envelope) for `buffer_id`, or KeyHeld.
    Called after `join`, whose buffer lock orders two requests of one key: the second sees the first's claim."""
    from ..store.core import IDEMPOTENCY_WINDOW

    if await conn.fetchval("flow_buffer_key_claim", project=project, key=key, buffer_id=buffer_id,
                           event_id=event_id, now=now, window=IDEMPOTENCY_WINDOW) is None:
        raise KeyHeld(key)


async def held_by(store, project: str, key: str, now: datetime) -> dict[str, Any]:
    """The answer to a repeat of `key`: its buffer, the run it started (None: not flushed yet), the key's age."""
    row = await store.fetchrow("flow_buffer_key_get", project=project, key=key)
    return {"buffer_id": row["buffer_id"], "run_id": row["run_id"],
            "key_age_seconds": max(0.0, (now - row["created_at"]).total_seconds())}


@dataclass(frozen=True)
class Joined:
    outcome: str              # buffered | deduplicated
    buffer_id: str
    run_id: str | None        # the run a flush started for this event's buffer (inline, or earlier), else None


def _ms(n: int | None) -> timedelta:
    return timedelta(milliseconds=n or 0)


async def _open(conn, project: str, workflow_id: str, spec: dict[str, Any], key: str, queue: str | None,
                partition_key: str | None, now: datetime):
    first_due = now + _ms(spec["quiet_ms"] if spec["kind"] == "debounce" else spec["max_wait_ms"])
    max_due = now + _ms(spec["max_wait_ms"])
    return await conn.fetchrow("flow_buffer_open", buffer_id=new_id("fb", now), project=project,
                               workflow_id=workflow_id, kind=spec["kind"], key=key,
                               deliver=spec.get("deliver") or "all", queue=queue, partition_key=partition_key,
                               now=now, due_at=min(first_due, max_due), max_due_at=max_due)


async def join(conn, project: str, workflow_id: str, spec: dict[str, Any], *, key: str, trigger_id: str | None,
               env: dict[str, Any], queue: str | None, partition_key: str | None, now: datetime) -> Joined:
    """Put envelope `env` (as stored: id, occurred_at ISO, data...) in the open buffer of `key`."""
    held = await conn.fetchrow("flow_buffer_event_held", project=project, workflow_id=workflow_id, event_id=env["id"])
    if held is not None:
        return Joined("deduplicated", held["buffer_id"], held["run_id"])
    envelope = encode_json(env)
    size = len(envelope.encode("utf-8"))
    buf = await _open(conn, project, workflow_id, spec, key, queue, partition_key, now)
    if buf["events"] > 0 and buf["bytes"] + size > spec["max_bytes"]:
        await flush(conn, buf["buffer_id"], "maxBytes", now)
        buf = await _open(conn, project, workflow_id, spec, key, queue, partition_key, now)
    buffer_id = buf["buffer_id"]
    added = await conn.fetchrow("flow_buffer_add", buffer_id=buffer_id, project=project, workflow_id=workflow_id,
                                event_id=env["id"], trigger_id=trigger_id, occurred_at=_instant(env["occurred_at"]),
                                now=now, bytes=size, envelope=envelope, quiet_ms=spec.get("quiet_ms") or 0)
    if added is None:   # pragma: no cover - the same event joined in a concurrent transaction (ids are claimed first)
        return Joined("deduplicated", buffer_id, None)
    run_id = None
    if added["events"] >= spec["max_size"]:
        run_id = await flush(conn, buffer_id, "maxSize", now)
    elif added["bytes"] >= spec["max_bytes"]:
        run_id = await flush(conn, buffer_id, "maxBytes", now)
    return Joined("buffered", buffer_id, run_id)


def _instant(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


async def deliver(conn, project: str, workflow_id: str, workflow_ir: dict[str, Any], *, trigger_id: str | None,
                  env: dict[str, Any], raw: str, partition_key: str | None, now: datetime,
                  record_delivery: bool = True, key: str | None = None) -> dict[str, Any]:
    """Deliver envelope `env` (text `raw`, kept as received) to a buffered workflow: it joins its key's buffer
    (outcome `buffered`, the delivery record `buffered` until the flush names its run), or, when its key cannot be
    computed, becomes a dead letter with E_FLOW_KEY_INVALID (outcome `dead_lettered`). `record_delivery`: write
    the bus's `event_deliveries` row (a webhook has none); `key`: the request's idempotency key to claim (KeyHeld
    when an earlier request holds it; the bus deduplicates its events before)."""
    from ...errors import A44Error
    from ..ingestion.dead_letters import dead_letter
    from .keys import buffer_key

    spec = workflow_ir["buffer"]
    event_id = env["id"]
    try:
        bkey = await buffer_key(spec, env)
    except A44Error as err:
        dl = await dead_letter(conn, project, workflow_ir.get("queue"), workflow_id, trigger_id, raw, err, now,
                               event_id=event_id)
        if record_delivery:
            await conn.execute("event_delivery_insert", event_id=event_id, trigger_id=trigger_id, project=project,
                               outcome="dead_lettered", run_id=None, now=now)
        return {"trigger_id": trigger_id, "outcome": "dead_lettered", "run_id": None, "dead_letter_id": dl,
                "error_code": err.code, "error_message": err.message}
    if record_delivery:
        await conn.execute("event_delivery_insert", event_id=event_id, trigger_id=trigger_id, project=project,
                           outcome="buffered", run_id=None, now=now)
    joined = await join(conn, project, workflow_id, spec, key=bkey, trigger_id=trigger_id, env=env,
                        queue=workflow_ir.get("queue"), partition_key=partition_key, now=now)
    if key is not None:
        await claim(conn, project, key, joined.buffer_id, event_id, now)
    return {"trigger_id": trigger_id, "outcome": "buffered", "run_id": joined.run_id, "buffer_id": joined.buffer_id}
