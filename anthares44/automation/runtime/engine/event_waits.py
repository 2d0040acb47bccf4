"""The look of an event wait (§20, docs/waits.md "Event waits", migration 0035): `look(v, p, sp, a, now)`.

One short transaction under the lock of the wait's correlation value (the lock ingestion takes to index an event
with that value, wait_index.py): open the wait (idempotent), read the correlated events past its cursor in the
order they were indexed, skip those older than its `since` (counted) and those its `if` refuses (an `if` that
fails to evaluate is a refusal, counted), and satisfy it with the first that passes, unless it closed first; at
or after its instant, with none found, time it out. Only events received before the instant are candidates, so
a late event never resumes a timed-out wait. Every examined row moves the cursor, so each is looked at once.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from ...errors import E_EXPR_EVAL, A44Error
from .. import evaluation
from ..ingestion import wait_index
from ..ingestion.metrics import COUNTERS
from .dag_steps import Steps
from .progress import Progress, StepProgress
from .visit import Visit

BATCH = 200             # candidates read per query
MAX_EXAMINED = 2_000    # per look: a wait with more pending is made due again by the release's wait_check


async def look(v: Visit, p: Progress, sp: StepProgress, started_at: datetime, now: datetime) -> Any:
    """The wait's row after this look: (state, output, timeout_at). Raises A44Error(E_EXPR_EVAL) when the run's
    side of `correlate` cannot be evaluated (the step's own mistake, not an event's)."""
    w, L = sp.node.wait, v.lease
    assert w is not None and w.event is not None
    scope = Steps(v, p).cel_scope(sp.node.id)
    value = await run_value(v, sp, w, scope)
    h = wait_index.program_hash(w.correlate_event)
    async with v.store.transaction("event_wait_look") as conn:
        await conn.fetchval("event_wait_lock", project=L.project_id, type=w.event, hash=h, value=value)
        row = await conn.fetchrow("event_wait_open", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id,
                                  project=L.project_id, type=w.event, hash=h, value=value, since=w.since,
                                  lookback_ms=w.lookback_ms,
                                  timeout_at=started_at + timedelta(milliseconds=w.timeout_ms), now=now)
        assert row is not None
        if row["state"] != "open":
            return row
        found, cursor, before, errors = await scan(conn, v, sp, w, h, value, row["cursor"], row, scope)
        row = await conn.fetchrow("event_wait_settle", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id,
                                  cursor=cursor, before=before, errors=errors,
                                  event_id=found["event_id"] if found else None,
                                  envelope=found["envelope"] if found else None, now=now)
        assert row is not None
        if row["state"] == "open" and now >= row["timeout_at"]:
            row = await conn.fetchrow("wait_timeout", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id, now=now)
            assert row is not None
    return row


async def scan(conn: Any, v: Visit, sp: StepProgress, w: Any, h: str, value: str, cursor: int, row: Any,
               scope: dict) -> tuple[Any, int, int, int]:
    """Read the correlated events of wait (or `any` branch) `w` past `cursor`, under its value's lock, in the
    order they were indexed: (the first that passes, or None; the new cursor; skipped as older than `since`;
    `if` failures). `row` has the wait's timeout_at and its run's event_seq and created_at."""
    L = v.lease
    before = errors = examined = 0
    lookback = w.lookback_ms
    since_at = row["created_at"] - timedelta(milliseconds=lookback) if lookback else None
    watermark = -1 if w.since == "wait_open" else row["event_seq"] or 0
    while examined < MAX_EXAMINED:
        batch = await conn.fetch("event_wait_candidates", project=L.project_id, type=w.event, hash=h, value=value,
                                 cursor=cursor, timeout_at=row["timeout_at"], run_id=L.run_id, epoch=L.epoch,
                                 event_seq=watermark, since_at=since_at, limit=BATCH)
        for c in batch:
            cursor, examined = c["cseq"], examined + 1
            if c["taken"]:      # another wait of this run took it: one event per run, once
                continue
            if not c["admitted"]:
                before += 1
                continue
            ok = await _passes(v, sp, w, json.loads(c["envelope"]), scope)
            if ok is None:
                errors += 1
            elif ok:
                _count(w, before, errors)
                return c, cursor, before, errors
        if len(batch) < BATCH:
            break
    _count(w, before, errors)
    return None, cursor, before, errors


def _count(w: Any, before: int, errors: int) -> None:
    if before:
        COUNTERS.inc("wait_event_before_since_total", before, type=w.event)
    if errors:
        COUNTERS.inc("wait_event_if_errors_total", errors, type=w.event)


async def run_value(v: Visit, sp: StepProgress, w: Any, scope: dict) -> str:
    """The run's side of the correlation of wait (or `any` branch) `w`: '' for a broadcast."""
    if w.correlate_run is None:     # a broadcast wait
        return ""
    try:
        got = wait_index.value_text(await evaluation.evaluate(v.program(sp.node, w.correlate_run), scope,
                                                              evaluation.INGESTION_TIMEOUT_S))
    except A44Error as err:
        raise A44Error(E_EXPR_EVAL, f"correlate.run of step {sp.node.id} ({w.correlate_run.cel}): {err.message}",
                       step_id=sp.node.id) from None
    except Exception as exc:  # EvalError and friends: the expression, not the worker, is at fault
        raise A44Error(E_EXPR_EVAL, f"correlate.run of step {sp.node.id} ({w.correlate_run.cel}) failed: {exc}",
                       step_id=sp.node.id) from None
    if got is None:
        raise A44Error(E_EXPR_EVAL, f"correlate.run of step {sp.node.id} ({w.correlate_run.cel}) gave null: the "
                                    "wait would correlate with no event", step_id=sp.node.id,
                       hint="correlate on a field every run has, e.g. input.invoiceId")
    return got


async def _passes(v: Visit, sp: StepProgress, w: Any, envelope: dict, scope: dict) -> bool | None:
    """The `if` of `w` on a candidate: True, False, or None when it failed to evaluate (a non-match)."""
    if w.condition is None:
        return True
    try:
        got = await evaluation.evaluate(v.program(sp.node, w.condition), {**scope, "event": envelope},
                                        evaluation.INGESTION_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - an event the condition cannot read is a non-match, never a crash
        return None
    return got is True
