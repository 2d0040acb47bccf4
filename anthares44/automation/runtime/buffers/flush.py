"""One buffer becomes one run (§22): `flush(conn, buffer_id, reason, now)` makes the one conditional transition
open -> flushed (`flow_buffer_close`, `where state = 'open'`) and, in the same transaction, creates the run that
carries the buffer's events (idempotency key `flow:<buffer_id>`) and names it on the events' deliveries.

Either all of that commits or none of it: a process killed mid-flush leaves the buffer open, and the next flush
of any daemon takes it. The caller holds the buffer's row lock (`flow_buffer_take_due` or the ingestion's
`flow_buffer_open`), so no event can join the buffer between the transition and the read of its envelopes.

The run's input: `deliver: last` / `first` - the data of the event latest / earliest by `occurred_at` (arrival
breaks ties), exactly what a run of that event alone would get, and `event_id` is that event; `deliver: all` and
every batch - `{"key": <buffer key>, "events": [envelope, ...]}` in `occurred_at` order.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from ..ingestion.runs import create_run_in
from ..ulid import new_run_id

log = logging.getLogger("a44.flow")
REASONS = ("quiet", "maxWait", "maxSize", "maxBytes")


def run_input(deliver: str, key: str, envelopes: list[dict[str, Any]]) -> tuple[Any, dict[str, Any] | None]:
    """(the run's input, the one event it stands for, None for `all`) from the envelopes in occurred_at order."""
    if deliver == "last":
        return envelopes[-1].get("data"), envelopes[-1]
    if deliver == "first":
        return envelopes[0].get("data"), envelopes[0]
    return {"key": key, "events": envelopes}, None


async def flush(conn, buffer_id: str, reason: str, now: datetime) -> str | None:
    """Flush buffer `buffer_id` (row locked by the caller) for `reason`; the run it started, None when another
    flush won (the buffer was no longer open)."""
    assert reason in REASONS, reason
    run_id = new_run_id(now)
    row = await conn.fetchrow("flow_buffer_close", buffer_id=buffer_id, now=now, reason=reason, run_id=run_id)
    if row is None:
        return None
    rows = await conn.fetch("flow_buffer_envelopes", buffer_id=buffer_id)
    envelopes = [json.loads(r["envelope"]) if isinstance(r["envelope"], str) else r["envelope"] for r in rows]
    input, chosen = run_input(row["deliver"], row["buffer_key"], envelopes)
    pick = chosen if chosen is not None else envelopes[0]
    trigger_id = next(r["trigger_id"] for r in rows if r["event_id"] == pick["id"])
    made = await conn_create(conn, row, run_id, input, trigger_id, chosen["id"] if chosen else None, now)
    await conn.execute("flow_buffer_link_deliveries", buffer_id=buffer_id, run_id=made)
    log.info("flushed %s buffer %s of %s (key %r, %d events, %s): run %s", row["kind"], buffer_id,
             row["workflow_id"], row["buffer_key"], row["events"], reason, made)
    return made


async def conn_create(conn, row, run_id: str, input: Any, trigger_id: str | None, event_id: str | None,
                      now: datetime) -> str:
    made = await create_run_in(conn, row["project_id"], row["workflow_id"], None, input, f"flow:{row['buffer_id']}",
                               trigger_id=trigger_id, event_id=event_id, partition_key=row["partition_key"],
                               queue=row["queue"], now=now, run_id=run_id)
    assert made.run_id is not None, "a buffer of an unpublished workflow"   # publish stores versions first
    return made.run_id
