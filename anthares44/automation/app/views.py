"""The documents the application functions return: runs, attempts and run events as plain dicts with a fixed
set of keys, the same for the CLI's `--format json` and the REST API.

Rows come from the store with every column; a view keeps the keys a user reads, adds computed durations
(milliseconds), and leaves out bulky columns (run input/result stay on `Automation.get_run`, attempt results on
`Store.load_result`). Timestamps stay `datetime` here; `jsonenc.to_json` turns them into ISO 8601 UTC strings.
"""

from __future__ import annotations

from datetime import datetime

from ..jsonenc import ms as _ms

RUN_KEYS = ("run_id", "project_id", "workflow_id", "version", "state", "current_step", "failed_step", "error_code",
            "error_message", "idempotency_key", "trigger_id", "partition_key", "queue", "epoch", "created_at",
            "started_at", "finished_at")
RUN_DETAIL_KEYS = ("input", "result", "summary", "due_at")   # due_at: the earliest of its open sleeps (§19)
ATTEMPT_KEYS = ("step_id", "attempt", "kind", "status", "error_code", "error_message", "started_at", "finished_at",
                "epoch", "idempotency_key", "worker_id", "result_bytes")
PARTITION_STATES = ("pending", "running", "success", "retrying", "failed", "timeout", "skipped")
PARTITION_KEYS = ("run_id", "workflow_id", "step_id", "partition", "state", "attempts", "rows", "error_code",
                  "error_message", "worker_id", "skipped_by", "skip_reason", "epoch", "started_at", "finished_at",
                  "updated_at", "run_state")
EVENT_KEYS = ("id", "run_id", "at", "kind", "state", "step_id", "attempt", "status", "error_code", "message", "data")



def run_view(row: dict, now: datetime, *, detail: bool = False) -> dict:
    """A run; `duration_ms` is created -> finished, or created -> now while it is not finished."""
    doc = {k: row.get(k) for k in RUN_KEYS}
    end = row.get("finished_at") or now
    doc["duration_ms"] = _ms(end - row["created_at"]) if row.get("created_at") else None
    doc["rows"] = rows_view(row)
    if detail:
        doc.update({k: row.get(k) for k in RUN_DETAIL_KEYS})
        doc["timers"] = [{"step_id": s, "attempt": a, "due_at": d}       # its open sleeps, earliest first
                         for s, a, d in zip(row.get("timer_steps") or (), row.get("timer_attempts") or (),
                                            row.get("timer_dues") or ())]
    return doc


def rows_view(row: dict) -> dict:
    """Rows in / out / in error of a run (§16, docs/rows.md): from its summary, or the list query's columns."""
    src = row.get("summary") if isinstance(row.get("summary"), dict) else row
    return {"in": src.get("rows_in"), "out": src.get("rows_out"), "error": src.get("rows_in_error")}


def attempt_view(row: dict) -> dict:
    doc = {k: row.get(k) for k in ATTEMPT_KEYS}
    if row.get("due_at") is not None:       # a sleep's due instant, stored when it opened (§19)
        doc["due_at"] = row["due_at"]
    doc["duration_ms"] = _ms(row.get("duration")) if row.get("duration") is not None else (
        _ms(row["finished_at"] - row["started_at"]) if row.get("finished_at") else None)
    return doc


def partition_view(row: dict) -> dict:
    """One partition of a fan-out step: its state, attempts, rows, who skipped it, and its run's state."""
    return {k: row.get(k) for k in PARTITION_KEYS}


def event_view(row: dict) -> dict:
    """One run event. For attempt events, `data` carries the attempt `kind` (action | compensation), `epoch`
    and, once finished, `duration_ms`."""
    return {k: row.get(k) for k in EVENT_KEYS}
