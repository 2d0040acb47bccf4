"""The use cases of human approval (§20, docs/approvals.md), for the CLI, the REST API, the console and one-click
links alike:

    await approve(store, project, run_id, step, "approve", person="alice", via="rest", comment="ok")
    await approvals(store, project, person="alice", overdue=False)      # what waits for whom
    await link_view(store, token)      # what a one-click link is for (its GET: changes nothing)
    await link_decide(store, token, "approve", comment=None)           # its POST: decides, once

A person is the name of an API token (REST, console) or `local:<os user>` (a local CLI call); a link decides for
the person it was signed for."""

from __future__ import annotations

from typing import Any

from ..runtime.approvals import links
from ..runtime.approvals.decisions import MAX_COMMENT, decide, open_requests

LINK_PATH = links.PATH            # where the HTTP plane serves one-click links
__all__ = ["MAX_COMMENT", "LINK_PATH", "approve", "approvals", "link_decide", "link_view", "local_person"]


def local_person() -> str:
    """Who a local CLI call is: `local:<os user>`."""
    import getpass

    return f"local:{getpass.getuser()}"


async def approve(store, project: str, run_id: str, step: str, decision: str, *, person: str, via: str,
                  comment: str | None = None) -> dict[str, Any]:
    return await decide(store, project, run_id, step, person, decision, comment=comment, via=via)


async def approvals(store, project: str, *, person: str | None = None, overdue: bool = False,
                    limit: int = 100) -> list[dict[str, Any]]:
    return await open_requests(store, project, person=person, overdue=overdue, limit=limit)


async def link_view(store, token: str) -> dict[str, Any]:
    """The link's run, step and person, and the request as it stands; raises a refused link's error. Reads only."""
    link = links.verify(await links.key(store), token, store.clock.now())
    requests = await store.fetch("approval_requests_of_run", run_id=link.run_id, now=store.clock.now())
    mine = [dict(r) for r in requests if r["step_id"] == link.step_id and r["epoch"] == link.epoch]
    return {"project": link.project, "run_id": link.run_id, "step": link.step_id, "person": link.person,
            "expires_at": link.expires_at, "request": mine[0] if mine else None}


async def link_decide(store, token: str, decision: str, *, comment: str | None = None) -> dict[str, Any]:
    """Decide as the link's person; the link's nonce is consumed with the decision (a second POST: 409)."""
    link = links.verify(await links.key(store), token, store.clock.now())
    return await decide(store, link.project, link.run_id, link.step_id, link.person, decision, comment=comment,
                        via="link", nonce=link.nonce, epoch=link.epoch)


def waiting_text(request: dict[str, Any]) -> str:
    """`approval of sign-off 1/2 by alice, bob`: what an open approval waits for, and who may give it."""
    approvals = sum(1 for d in request["decisions"] if d["decision"] == "approve")
    who = ", ".join(request["deciders"]) or "nobody (its groups have no member)"
    return f"approval of {request['step_id']} {approvals}/{request['min_approvals']} by {who}"


async def waiting_on(store, run_ids: list[str]) -> dict[str, str]:
    """run id -> `waiting_text` of its open approval (runs that wait on one)."""
    out: dict[str, str] = {}
    for run_id in run_ids:
        for r in await requests_of_run(store, run_id):
            if r["state"] == "open":
                out[run_id] = waiting_text(r)
    return out


async def requests_of_run(store, run_id: str) -> list[dict[str, Any]]:
    """A run's approval requests: state, who may decide now, the decisions so far (`runs show`)."""
    return [dict(r) for r in await store.fetch("approval_requests_of_run", run_id=run_id, now=store.clock.now())]
