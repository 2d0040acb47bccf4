"""The outbox's reads and writes outside delivery: enqueueing (a channel test; alert rules enqueue in their own
transactions), listing, showing, and sending a failed notification again (`a44 monitor notifications`)."""

from __future__ import annotations

import json

from ...errors import E_INVALID_ARGUMENT, E_NOTIFICATION_DELIVERED, E_NOTIFICATION_NOT_FOUND, A44Error
from ...suggestions import closest

STATES = ("pending", "delivered", "failed")
KINDS = ("firing", "update", "escalation", "resolved", "test")
SEVERITIES = ("p1", "p2", "p3", "p4")
MAX_LIST = 1000


async def enqueue(store, project: str, channel: str, *, idempotency_key: str, kind: str, severity: str,
                  payload: dict, alert_id: str | None = None) -> int | None:
    """Queue one notification, due now; None when `idempotency_key` was queued before (nothing written)."""
    if kind not in KINDS or severity not in SEVERITIES:
        raise A44Error(E_INVALID_ARGUMENT, f"kind {kind!r} / severity {severity!r} not one of {KINDS} / {SEVERITIES}")
    return await store.fetchval("notify_enqueue", project=project, channel=channel, idempotency_key=idempotency_key,
                                alert_id=alert_id, kind=kind, severity=severity, payload=json.dumps(payload),
                                now=store.clock.now())


def check_state(state: str | None) -> str | None:
    if state is not None and state not in STATES:
        near = closest(state, STATES, 0.5)
        raise A44Error(E_INVALID_ARGUMENT, f"unknown notification state {state!r}",
                       hint=(f"did you mean {near}? " if near else "") + "states: " + ", ".join(STATES))
    return state


async def listing(store, project: str, state: str | None = None, limit: int = 100) -> list[dict]:
    if not 1 <= limit <= MAX_LIST:
        raise A44Error(E_INVALID_ARGUMENT, f"--limit must be 1..{MAX_LIST}")
    rows = await store.fetch("notify_list", project=project, state=check_state(state), limit=limit)
    return [dict(r) for r in rows]


async def get(store, project: str, notification_id: int) -> dict:
    row = await store.fetchrow("notify_get", project=project, id=notification_id)
    if row is None:
        raise A44Error(E_NOTIFICATION_NOT_FOUND, f"no notification {notification_id} in {project}",
                       hint="a44 monitor notifications --state failed")
    return dict(row)


async def requeue(store, project: str, notification_id: int) -> bool:
    """A failed notification pending again with a fresh attempt budget (True); False when it is pending already.
    E_NOTIFICATION_DELIVERED for one delivered: a delivered notification is never sent again."""
    row = await store.fetchrow("notify_requeue", project=project, id=notification_id, now=store.clock.now())
    if row is None:
        await get(store, project, notification_id)     # raises E_NOTIFICATION_NOT_FOUND
    if row["previous"] == "delivered":
        raise A44Error(E_NOTIFICATION_DELIVERED, f"notification {notification_id} was delivered already",
                       hint="a delivered notification is never sent again; `a44 monitor channel test NAME` sends a "
                            "test message")
    return bool(row["requeued"])
