"""REST endpoints of human approval (§20, docs/approvals.md): a decision on a run's approval step (the
`automation:approve` scope; the person is the calling token's name) and the open approvals of the project."""

from __future__ import annotations

from aiohttp import web

from ...app.contract import endpoints as ep
from ...app.contract.models import approvals as apm
from ..context import automation_for, json_response, principal, read_model
from ..params import params
from ..routing import APPROVE, READ, route


@route(ep.APPROVE, "decide on a run's approval step as the calling token's name (as `approve`): approve or "
       "reject, with a comment; a second decision by the same person answers their first (`duplicate`)",
       scope=APPROVE, body=apm.DecisionRequest, errors=(404, 409), tag="approvals")
async def api_approve(request: web.Request) -> web.Response:
    b = await read_model(request, apm.DecisionRequest)
    p = params(request)
    return json_response(await automation_for(request).approve(
        p["run_id"], p["step"], b.decision, person=principal(request).name, via="rest", comment=b.comment))


@route(ep.APPROVALS, "the open approvals of the project, oldest first (as `approvals`): `mine` only those the "
       "calling token's name may decide and has not, `overdue` only those past their first reminder",
       scope=READ, query=("mine", "overdue", "limit"), tag="approvals")
async def api_approvals(request: web.Request) -> web.Response:
    q = params(request)
    person = principal(request).name if q.get("mine") else None
    rows = await automation_for(request).approvals(person=person, overdue=bool(q.get("overdue")),
                                                   limit=max(1, min(q.get("limit", 100), 1000)))
    return json_response({"approvals": rows})
