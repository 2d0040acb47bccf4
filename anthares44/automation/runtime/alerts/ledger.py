"""The store's side of an alert's life: each occurrence, clearing or tick runs the suppression state machine
(suppression.py) on the stored alert and commits, in one transaction, the alert's new state, a history row per
transition and one notification per message into automation.notifications, keyed so that deciding the same thing
twice (a retry after a crash, a racing evaluator) enqueues it once.

A message with no channel (a project that routes nowhere) is still recorded and counted, and logged as one
WARNING line carrying the next command: never silence.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime

from ...jsonenc import to_json
from . import incidents
from . import suppression as sm

log = logging.getLogger("a44.alerts")
LISTED = 10                     # run ids, steps, partitions an alert that aggregates many keeps


def alert_id(project: str, rule: str, group_key: str, opened: datetime) -> str:
    """Derived, not random: the same opening decided twice is the same alert."""
    digest = hashlib.sha256(f"{project}\x00{rule}\x00{group_key}\x00{opened.isoformat()}".encode()).hexdigest()
    return "al_" + digest[:24]


async def record(store, *, project: str, rule: str, group_key: str, policy: sm.Policy, context: dict,
                 now: datetime, n: int = 1, event_id: int | None = None) -> tuple[dict | None, list[sm.Message]]:
    """`n` occurrences of (rule, group): open the alert, or count them into the firing one. Returns the alert
    (None: nothing changed) and the messages enqueued. `event_id`: the run event the occurrence is, counted once
    however often it is read (a round cut short by a crash reads it again)."""
    async with store.transaction("alert_record") as tx:
        if event_id is not None and not await tx.fetch("alert_seen_add", ids=[event_id]):
            return None, []
        row = await tx.fetchrow("alert_firing_get", project=project, rule=rule, group_key=group_key)
        if row is None:
            state, msgs = sm.open_alert(policy, now, n)
            aid = alert_id(project, rule, group_key, now)
            ctx = _merge({}, context)
            if await tx.fetchval("alert_insert", alert_id=aid, project=project, rule=rule, group_key=group_key,
                                 severity=policy.severity, machine=json.dumps(state.to_json()),
                                 context=to_json(ctx, indent=None), now=now) is None:
                return None, []     # another evaluator opened it first; it counts this occurrence
        else:
            aid = row["alert_id"]
            state, msgs = sm.occur(sm.State.from_json(row["machine"]), policy, now, n)
            ctx = _merge(row["context"], context)
            await _store(tx, aid, state, ctx, now)
        await _send(tx, project, rule, aid, state, policy, ctx, msgs, now)
    return {"alert_id": aid, "project_id": project, "rule": rule, "group_key": group_key, "context": ctx}, msgs


async def settle(store, alert: dict, policy: sm.Policy, now: datetime, *, cleared: bool,
                 context: dict | None = None) -> list[sm.Message]:
    """Clear a firing alert (`cleared`), else let time pass on it (the escalation when its window has ended)."""
    async with store.transaction("alert_settle") as tx:
        row = await tx.fetchrow("alert_firing_get", project=alert["project_id"], rule=alert["rule"],
                                group_key=alert["group_key"])
        if row is None or row["alert_id"] != alert["alert_id"]:
            return []
        old = sm.State.from_json(row["machine"])
        state, msgs = (sm.clear if cleared else sm.tick)(old, policy, now)
        if not msgs:
            return []
        ctx = _merge(row["context"], context or {})
        await _store(tx, row["alert_id"], state, ctx, now)
        await _send(tx, alert["project_id"], alert["rule"], row["alert_id"], state, policy, ctx, msgs, now)
    return msgs


async def _store(tx, aid: str, state: sm.State, ctx: dict, now: datetime) -> None:
    await tx.execute("alert_update", alert_id=aid, machine=json.dumps(state.to_json()),
                     context=to_json(ctx, indent=None), now=now, resolved=state.resolved)


async def _send(tx, project: str, rule: str, aid: str, state: sm.State, policy: sm.Policy, ctx: dict,
                msgs: list[sm.Message], now: datetime) -> None:
    by_kind: dict[str, list[str]] = {}
    for m in msgs:
        channels = by_kind.setdefault(m.kind, [])
        payload = message_payload(project, rule, aid, state, policy, ctx, m)
        if m.channel is None:
            log.warning("alert %s %s %s (%d): %s; no channel: %s", aid, rule, m.kind, m.count,
                        payload["title"], payload.get("next_action") or "a44 monitor alerts")
            continue
        if m.kind == "firing" and payload.get("causes"):      # one incident per cause (incidents.py)
            if not await incidents.send_firing(tx, project, rule, aid, m.channel, m.key(aid), m.severity, payload,
                                               now):
                continue        # grouped into an incident already sent: no message of its own
        else:
            await tx.fetchval("notification_enqueue", project=project, channel=m.channel, key=m.key(aid),
                              alert_id=aid, kind=m.kind, severity=m.severity, payload=to_json(payload, indent=None),
                              now=now)
        channels.append(m.channel)
    for kind, channels in by_kind.items():
        await tx.execute("alert_history_add", alert_id=aid, now=now, kind=kind, count=state.count, channels=channels)


def message_payload(project: str, rule: str, aid: str, state: sm.State, policy: sm.Policy, ctx: dict,
                    m: sm.Message) -> dict:
    """What a notification says (docs/alerts.md "Messages"): the alert, the counts, and its context."""
    title = ctx.get("title") or rule
    return {"alert_id": aid, "project": project, "rule": rule, "kind": m.kind, "severity": m.severity,
            "title": f"[{m.severity.upper()}] {m.kind}: {title}", "count": m.count,
            "first_at": state.opened_at, "window_ends_at": state.window_ends_at(policy).isoformat(),
            **{k: v for k, v in ctx.items() if k != "title"}}


def _merge(old: dict, new: dict) -> dict:
    """The latest occurrence's context, keeping the distinct runs, steps and partitions seen (the first LISTED)."""
    out = {**old, **{k: v for k, v in new.items() if not k.endswith("s_seen")}}
    for key in ("runs_seen", "steps_seen", "partitions_seen"):
        seen = list(old.get(key, []))
        for v in new.get(key, []):
            if v is not None and v not in seen and len(seen) < LISTED:
                seen.append(v)
        if seen or key in new:
            out[key] = seen
    return out
