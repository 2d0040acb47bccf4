"""The messages of an approval request (§20, docs/approvals.md) to its step's channel (`notify:`): the request when
it opens, each reminder at its instant, the escalation at its instant. Each is one row of the notification outbox
(runtime/notify) with an idempotency key of (run, epoch, step, which), so a visit repeated, taken over or run by
two daemons at once enqueues it once; the delivery worker sends it, retrying. A reminder never ends the run.

Each message lists who may decide and has not yet (never the run's initiator, unless the step has `allowSelf`),
with one one-click link per person (links.py, expiring with the
request), and the command that decides."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...jsonenc import iso
from ..notify import outbox
from . import links

KIND = {"request": "firing", "escalation": "escalation"}      # a reminder is an `update` of the request
SEVERITY = {"request": "p3", "escalation": "p2"}


def key(run_id: str, epoch: int, step_id: str, which: str) -> str:
    return f"approval:{run_id}:{epoch}:{step_id}:{which}"


async def send(store, project: str, channel: str, *, run_id: str, epoch: int, step_id: str, workflow: str,
               which: str, timeout_at: datetime, now: datetime, public_url: str | None = None) -> int | None:
    """Enqueue message `which` (`request`, `remind:N`, `escalation`) of one approval; None when it was enqueued
    before (nothing written)."""
    deciders = await store.fetchval("approval_deciders", run_id=run_id, epoch=epoch, step_id=step_id, now=now)
    decided = {r["person"] for r in await store.fetch("approval_decisions_of", run_id=run_id, epoch=epoch,
                                                      step_id=step_id)}
    request = await store.fetchrow("approval_request_self", run_id=run_id, epoch=epoch, step_id=step_id)
    # the run's initiator cannot approve it (E_SELF_APPROVAL) unless the step allows it: not asked, no link
    barred = request["initiator"] if request is not None and not request["allow_self"] else None
    pending = [p for p in deciders or () if p not in decided and p != barred]
    k = await links.key(store)
    people: list[dict[str, Any]] = []
    for p in pending:
        path = links.PATH + links.sign_with(k, links.Link(project, run_id, epoch, step_id, p, timeout_at))
        absolute = links.url(public_url, path)      # A44_PUBLIC_URL: a link a mail reader can click
        people.append({"person": p, "path": path, **({"url": absolute} if absolute else {})})
    what = "reminder" if which.startswith("remind:") else which
    payload = {"title": f"[approval] {workflow} run {run_id} waits for a decision at step {step_id} ({what})",
               "workflow": workflow, "run_id": run_id, "step": step_id, "approval": which,
               "deciders": pending, "links": people, "timeout_at": iso(timeout_at),
               "next_action": f"a44 automation approve {run_id} --step {step_id} --decision approve|reject"}
    return await outbox.enqueue(store, project, channel, idempotency_key=key(run_id, epoch, step_id, which),
                                kind=KIND.get(what, "update"), severity=SEVERITY.get(what, "p3"), payload=payload)
