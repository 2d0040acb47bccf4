"""A verified webhook request for a workflow with `debounce` or `batch` (§9 + §22): instead of `webhook_ingest`'s
one-statement run, one transaction re-checks what that statement checks (`flow_webhook_current`: the cached
trigger, the secret that signed and the version are still current, else nothing is written and the caller starts
over from a fresh read), persists the envelope (automation.events, source `webhook`), puts it in its key's buffer
and claims the request's idempotency key `<trigger>:<key>` for that buffer (`flow_buffer_keys`, 24 h window).

Answers: 202 `{"run_id": null, "buffer_id"}` when buffered (`run_id` set when this request filled a batch and
started its run); 200 with the buffer (and its run once flushed) for a repeat within 24 h, which buffers nothing:
the repeat's transaction is rolled back whole, after the buffer lock showed it the first one's claim. A key that
cannot be computed from the body keeps the envelope as a dead letter and answers 422 E_FLOW_KEY_INVALID.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...errors import E_FLOW_KEY_INVALID, A44Error
from ...jsonenc import iso
from ..ingestion.dead_letters import dead_letter
from ..ingestion.ids import new_event_id
from ..ingestion.metrics import COUNTERS
from ..store.results import encode_json
from .intake import KeyHeld, claim, held_by, join
from .keys import buffer_key


async def accept(store, project: str, trigger, secret: str, data: Any, key: str, partition_key: str | None,
                 now: datetime):
    """(status, run_id, buffer_id, key age s, event_id) of a verified request; None when the cached trigger is
    stale (nothing written). Raises A44Error(E_FLOW_KEY_INVALID) with the dead letter's id in `details`."""
    trigger_id, workflow_ir = trigger.trigger_id, trigger.workflow_ir or {}
    event_id = new_event_id(now)
    env = {"id": event_id, "type": f"webhook.{trigger_id}", "idempotency_key": key, "partition_key": partition_key,
           "occurred_at": iso(now), "attempt": 1, "data": data, "trigger_id": trigger_id}
    raw = encode_json(env)
    run_key = f"{trigger_id}:{key}"
    try:
        bkey = await buffer_key(workflow_ir["buffer"], env)
    except A44Error as err:
        async with store.transaction("webhook_flow_key_invalid") as conn:
            dl = await dead_letter(conn, project, workflow_ir.get("queue"), trigger.workflow_id, trigger_id, raw,
                                   err, now)
        raise A44Error(E_FLOW_KEY_INVALID, f"{err.message}; kept as dead letter {dl}", hint=err.hint,
                       details={"dead_letter_id": dl}) from None
    try:
        async with store.transaction("webhook_buffer") as conn:
            if not await conn.fetchval("flow_webhook_current", project=project, trigger_id=trigger_id,
                                       trigger_stamp=trigger.updated_at, workflow_id=trigger.workflow_id,
                                       secret=secret, now=now, version=trigger.version):
                return None
            await conn.execute("event_insert", event_id=event_id, project=project, type=env["type"],
                               idempotency_key=key, partition_key=partition_key, trigger_id=trigger_id,
                               source="webhook", occurred_at=now, now=now, envelope=raw)
            joined = await join(conn, project, trigger.workflow_id, workflow_ir["buffer"], key=bkey,
                                trigger_id=trigger_id, env=env, queue=workflow_ir.get("queue"),
                                partition_key=partition_key, now=now)
            await claim(conn, project, run_key, joined.buffer_id, event_id, now)
    except KeyHeld:
        held = await held_by(store, project, run_key, now)
        COUNTERS.inc("webhook_accepted_total", outcome="deduplicated")
        return 200, held["run_id"], held["buffer_id"], held["key_age_seconds"], None
    COUNTERS.inc("webhook_accepted_total", outcome="buffered")
    return 202, joined.run_id, joined.buffer_id, 0.0, event_id
