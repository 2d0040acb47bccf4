"""Sending a signal to a run (§20, docs/waits.md): `send(store, project, run, name, data, key=..., by=...)`.

One statement (`run_signal`, migration 0033) locks the run's row, refuses a finished run, answers a repeated
idempotency key with the signal it first recorded, and otherwise records the signal: consumed at once by the
oldest open wait of its name (the run is made due) or buffered for the next wait that opens on it. Signals of one
name are consumed in the order received, each once.
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import E_RUN_NOT_FOUND, E_SIGNAL_INVALID, E_SIGNAL_RUN_FINISHED, E_SIGNAL_TOO_LARGE, A44Error
from ..store.core import Store
from ..store.results import encode_json

MAX_SIGNAL_BYTES = 256 * 1024
NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,99}$")
DELIVERED, BUFFERED, DUPLICATE = "delivered", "buffered", "duplicate"


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise A44Error(E_SIGNAL_INVALID, f"signal name {name!r} is not a lowercase name (a-z, 0-9, _ . -, at most 100)",
                       hint="e.g. `approved`, `payment.received`")
    return name


def encode_data(data: Any) -> str:
    """The signal's data as JSON text, refused over 256 KB (the same limit as a step's inline result)."""
    try:
        text = encode_json(data)
    except A44Error as exc:
        raise A44Error(E_SIGNAL_INVALID, f"the signal's data is not JSON: {exc.message}") from None
    size = len(text.encode())
    if size > MAX_SIGNAL_BYTES:
        raise A44Error(E_SIGNAL_TOO_LARGE, f"the signal's data is {size} bytes; at most {MAX_SIGNAL_BYTES}",
                       hint="send a reference (an object key, an id) instead of the payload")
    return text


async def send(store: Store, project: str, run_id: str, name: str, data: Any = None, *, key: str | None = None,
               by: str | None = None) -> dict[str, Any]:
    """Returns {run_id, name, seq, outcome: delivered | buffered | duplicate, state}: `delivered` an open wait took
    it, `buffered` it waits for one, `duplicate` the idempotency key was sent before (its first signal's seq)."""
    text = encode_data(data)
    row = await store.fetchrow("run_signal", project=project, run_id=run_id, name=check_name(name), data=text,
                               key=key, by=by, now=store.clock.now())
    assert row is not None
    outcome = row["outcome"]
    if outcome == "unknown":
        raise A44Error(E_RUN_NOT_FOUND, f"no run {run_id} in project {project}",
                       hint="`a44 automation runs` lists the runs")
    if outcome == "finished":
        raise A44Error(E_SIGNAL_RUN_FINISHED, f"run {run_id} is {row['state']}: it takes no more signals",
                       details={"run_id": run_id, "state": row["state"]})
    return {"run_id": run_id, "name": name, "seq": row["seq"], "outcome": outcome, "state": row["state"]}
