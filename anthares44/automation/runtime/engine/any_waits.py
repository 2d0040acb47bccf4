"""The look of a `wait: {any: [...]}` (§20, docs/waits.md "The first of several"): `look(v, p, sp, started_at,
now)`.

One short transaction: the locks of its event branches' correlation values (in one order, the one ingestion
takes them in), then its run's row when it has signal branches (the lock run_signal takes first), then the open
(idempotent: one row of kind `any`, its branches beside it, migration 0035). Each branch offers its first
candidate with the instant it came: an event branch the first correlated event its `since` and `if` admit
(event_waits.scan), a signal branch the oldest buffered signal of its name, a sleep branch its end once passed,
and the timeout its instant once passed. The earliest wins, by one conditional close of the row
(`any_wait_close`, which consumes the signal when a signal wins): exactly one outcome, the output naming the
branch (`kind`, `index`). A cancel closes the row by the same rule (0033's trigger on `runs`).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from ..ingestion import wait_index
from .dag_steps import Steps
from .event_waits import run_value, scan
from .progress import Progress, StepProgress
from .visit import Visit


async def look(v: Visit, p: Progress, sp: StepProgress, started_at: datetime, now: datetime) -> dict[str, Any]:
    """{state, output, timeout_at}: `timeout_at` is when to look again while it stays open (its timeout, or the
    end of a sleep branch before it). Raises A44Error(E_EXPR_EVAL) when a branch's `correlate.run` fails."""
    w, L = sp.node.wait, v.lease
    assert w is not None
    scope = Steps(v, p).cel_scope(sp.node.id)
    events = []
    for i, b in enumerate(w.branches):
        if b.kind == "event":
            events.append({"branch": i, "type": b.event, "hash": wait_index.program_hash(b.correlate_event),
                           "value": await run_value(v, sp, b, scope), "since": b.since, "lookback_ms": b.lookback_ms})
    signals = [{"branch": i, "name": b.signal} for i, b in enumerate(w.branches) if b.kind == "signal"]
    async with v.store.transaction("any_wait_look") as conn:
        for key in sorted({(e["type"], e["hash"], e["value"]) for e in events}):
            await conn.fetchval("event_wait_lock", project=L.project_id, type=key[0], hash=key[1], value=key[2])
        if signals:
            await conn.fetchval("any_wait_lock_run", run_id=L.run_id)
        row = await conn.fetchrow("any_wait_open", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id,
                                  project=L.project_id, events=json.dumps(events), signals=json.dumps(signals),
                                  timeout_at=started_at + timedelta(milliseconds=w.timeout_ms), now=now)
        assert row is not None
        opened = row
        if row["state"] == "open":
            row = await _decide(conn, v, sp, events, opened, scope, now)
    due = opened["timeout_at"]
    for b in w.branches:
        if b.kind == "sleep" and b.sleep_ms is not None:
            due = min(due, opened["opened_at"] + timedelta(milliseconds=b.sleep_ms))
    return {"state": row["state"], "output": row["output"], "timeout_at": due}


async def _decide(conn: Any, v: Visit, sp: StepProgress, events: list[dict], opened: Any, scope: dict,
                  now: datetime) -> Any:
    """Close the open wait with its earliest candidate, if any has come; the row as it is then."""
    w, L = sp.node.wait, v.lease
    assert w is not None
    offers: list[tuple[datetime, int, dict[str, Any]]] = []    # (instant, branch, how to close)
    for e in events:
        b = w.branches[e["branch"]]
        at = await conn.fetchrow("any_wait_branch", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id,
                                 branch=e["branch"])
        found, cursor, before, errors = await scan(conn, v, sp, b, e["hash"], e["value"], at["cursor"], opened,
                                                   scope)
        await conn.execute("any_wait_advance", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id,
                           branch=e["branch"], cursor=cursor, before=before, errors=errors)
        if found is not None:
            offers.append((found["received_at"], e["branch"], dict(
                satisfied_by=f"event:{found['event_id']}", signal_seq=None,
                output={"kind": "event", "index": e["branch"], "event": json.loads(found["envelope"])})))
    for i, b in enumerate(w.branches):
        if b.kind == "signal":
            g = await conn.fetchrow("any_wait_signal_peek", run_id=L.run_id, name=b.signal)
            if g is not None:
                data = g["data"]    # jsonb, decoded by the store's codec
                offers.append((g["received_at"], i, dict(
                    satisfied_by=f"signal:{g['seq']}", signal_seq=g["seq"],
                    output={"kind": "signal", "index": i, "signal": {"name": b.signal, "data": data}})))
        elif b.kind == "sleep" and b.sleep_ms is not None:
            end = opened["opened_at"] + timedelta(milliseconds=b.sleep_ms)
            if end <= now:
                offers.append((end, i, dict(satisfied_by=f"sleep:{i}", signal_seq=None,
                                            output={"kind": "sleep", "index": i})))
    timeout_at = opened["timeout_at"]
    offers = [o for o in offers if o[0] < timeout_at]        # what came at or after the instant lost to it
    if offers:
        # a sleep's end, like the timeout, wins against what came at that very instant
        _, _, close = min(offers, key=lambda o: (o[0], o[2]["output"]["kind"] != "sleep", o[1]))
        return await conn.fetchrow("any_wait_close", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id,
                                   satisfied_by=close["satisfied_by"], output=json.dumps(close["output"]),
                                   signal_seq=close["signal_seq"], now=now)
    if now >= timeout_at:
        return await conn.fetchrow("wait_timeout", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id, now=now)
    return opened
