"""Indexing an event for the runs that wait for it (§20, docs/waits.md "Event waits", migration 0035).

Publishing a workflow records the correlation programs of its event waits per event type
(`event_wait_programs`). Every ingestion path that stores an event (the bus, `publish_event`; a webhook,
`webhook_ingest`) evaluates those programs on the envelope (`values`, before its write: off the event loop and
bounded, a failing program counts a miss and indexes nothing) and hands the (program hash, value) pairs to
`automation.event_correlate` in the transaction that stores the event: one row per pair, under the value's lock,
waking the runs whose open waits match. The engine's look (engine/event_waits.py) reads the same rows.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any

from .. import evaluation
from .metrics import COUNTERS

NONE = "none"           # the program hash of a broadcast wait (`correlate: none`), whose value is ''
MAX_VALUE = 512         # longer values are stored by their digest


def program_hash(expr: Any) -> str:
    """md5 of the CEL text (the migration's trigger computes the same from the IR), or 'none'."""
    if expr is None:
        return NONE
    cel = expr["cel"] if isinstance(expr, dict) else expr.cel
    return hashlib.md5(cel.encode()).hexdigest()


def value_text(value: Any) -> str | None:
    """A correlation value as stored and compared: strings as they are, numbers without a spurious `.0`, other
    JSON canonically; None (null, or nothing) correlates with nothing."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"),
                                                             default=str)
    return text if len(text) <= MAX_VALUE else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@lru_cache(maxsize=1024)
def _program(tree: str) -> Any:
    from ...grammar import load_program

    return load_program(json.loads(tree))


async def values(store: Any, project: str, type: str, envelope: dict) -> tuple[list[str], list[str]]:
    """(hashes, values): what the published waits on `type` correlate this event on."""
    rows = await store.fetch("event_wait_programs_of_type", project=project, type=type)
    hashes: list[str] = []
    vals: list[str] = []
    for row in rows:
        if row["program_hash"] == NONE:
            hashes.append(NONE)
            vals.append("")
            continue
        expr = row["program"]
        expr = json.loads(expr) if isinstance(expr, str) else expr
        try:
            program = _program(json.dumps(expr["program"], sort_keys=True))
            got = value_text(await evaluation.evaluate(program, dict(envelope), evaluation.INGESTION_TIMEOUT_S))
        except Exception:  # noqa: BLE001 - an event the program cannot read correlates with no wait, never a crash
            COUNTERS.inc("wait_correlation_errors_total", type=type)
            continue
        if got is not None:
            hashes.append(row["program_hash"])
            vals.append(got)
    return hashes, vals


async def correlate(conn: Any, project: str, type: str, event_id: str, received_at: Any,
                    hashes: list[str], vals: list[str], now: Any) -> int:
    """Record the event under its values (in the transaction that stores it); the runs made due."""
    if not hashes:
        return 0
    return int(await conn.fetchval("event_correlate", project=project, type=type, event_id=event_id,
                                   received_at=received_at, hashes=hashes, values=vals, now=now) or 0)
