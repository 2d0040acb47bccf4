"""The console's pages (GET): each reads through an application function and renders one template."""

from __future__ import annotations

import secrets
from dataclasses import asdict
from urllib.parse import quote

from aiohttp import web

from ...app.alerts import Alerts
from ...app.inspection import RUN_STATES, RunSearch, attempt_result, run_detail, search_runs
from ...app.queues import Queues
from ...app.schedules import schedules_overview
from ...errors import E_BAD_REQUEST, A44Error
from ..context import settings_for
from ..event_stream import stream_events
from ..params import count, ident, text
from .auth import PRESESSION_COOKIE, Session, cookie_args, csrf_for, safe_next
from .graph import layout, step_states
from .partition_grid import grid
from .render import console, page, see_other, view
from .timeline import lanes

GRID_PAGE = 500          # a run's partitions per page of the grid


def _query(request: web.Request, parsers: dict) -> dict:
    """The page's query parameters that are set (an empty form field is no filter), parsed as the REST API's."""
    out = {}
    for name, parse in parsers.items():
        raw = request.query.get(name, "")
        if raw != "":
            out[name] = parse(f"query parameter {name}", raw)
    return out


async def home(request: web.Request) -> web.Response:
    return see_other("/runs")


async def login_form(request: web.Request) -> web.Response:
    pre = request.cookies.get(PRESESSION_COOKIE) or secrets.token_hex(16)
    resp = page(request, "login.html", next=safe_next(request.query.get("next")),
                csrf=csrf_for(console(request).keys, pre), failed=None)
    resp.set_cookie(PRESESSION_COOKIE, pre, **cookie_args(request))
    return resp


RUN_FILTERS = {"workflow": ident, "state": ident, "step": ident, "error_code": ident, "partition_key": text,
               "since": text, "until": text, "after": text, "limit": count}


@view
async def runs(request: web.Request, session: Session, auto) -> web.Response:
    q = _query(request, RUN_FILTERS)
    after, limit = q.pop("after", None), q.pop("limit", 50)
    search = RunSearch(**q)
    result = await search_runs(auto, search, limit=limit, after=after)
    return page(request, "runs.html", session=session, result=result, filters=search.to_dict(), values=asdict(search),
                states=RUN_STATES, limit=limit)


@view
async def runs_live(request: web.Request, session: Session, auto) -> web.StreamResponse:
    """An event whenever some run changes (at most every 2 s): the runs page re-reads itself on each."""
    return await stream_events(request, auto.changes(), name="change")


@view
async def run(request: web.Request, session: Session, auto) -> web.Response:
    q = _query(request, {"after": text, "limit": count})
    detail = await run_detail(auto, ident("run id", request.match_info["run_id"]), **q)
    from ...app.lineage import run_tree

    tree = await run_tree(auto, detail["run"]["run_id"])     # §21: shown when the run has a parent or children
    # §22 "why queued" (as `runs explain`): shown while the run has not started and a limit or a pause holds it back
    why = await auto.explain(detail["run"]["run_id"]) if detail["run"]["state"] == "pending" else None
    return page(request, "run.html", session=session, tree=tree if len(tree["runs"]) > 1 else None,
                why=why if why and why.get("held_back") else None, **run_context(auto, detail, request))


ATTEMPT_KEY = {"step": text, "epoch": count, "kind": ident, "attempt": count}


@view
async def attempt(request: web.Request, session: Session, auto) -> web.Response:
    """One attempt's result, redacted, read only now (the run page lists attempts without their stored results)."""
    q = _query(request, ATTEMPT_KEY)
    missing = [name for name in ATTEMPT_KEY if name not in q]
    if missing:
        raise A44Error(E_BAD_REQUEST, f"query parameter {missing[0]} is required")
    run_id = ident("run id", request.match_info["run_id"])
    doc = await attempt_result(auto, run_id, step_id=q["step"], epoch=q["epoch"], kind=q["kind"],
                               attempt=q["attempt"])
    return page(request, "attempt.html", session=session, run_id=run_id, a=doc["attempt"], doc=doc)


def trace_link(template: str | None, trace_id: str | None) -> str | None:
    """The run's trace in the user's tracing UI (A44_TRACE_URL), or None: only an http(s) template that says
    where the id goes is linked, and the id (hex, from our own spans) is quoted into it."""
    if not (template and trace_id and "{trace_id}" in template and template.startswith(("http://", "https://"))):
        return None
    return template.replace("{trace_id}", quote(trace_id, safe=""))


def run_context(auto, detail: dict, request: web.Request | None = None) -> dict:
    run, attempts = detail["run"], detail["attempts"]
    sleep_steps = {n["id"] for n in detail["graph"]["nodes"] if n["kind"] == "sleep"}
    timeline, span_ms = lanes(run, attempts, sleep_steps, auto.store.clock.now())
    nodes, edges, width, height = layout(detail["graph"], step_states(detail["latest"], run))
    failing = next((a for a in reversed(detail["latest"]) if a.get("error_code")), None)
    return {"d": detail, "run": run, "timeline": timeline, "span_ms": span_ms, "nodes": nodes, "edges": edges,
            "dag_w": width, "dag_h": height, "failing": failing, "steps": [n["id"] for n in detail["graph"]["nodes"]],
            "trace_url": trace_link(settings_for(request).trace_url, detail.get("trace_id")) if request else None}


@view
async def run_live(request: web.Request, session: Session, auto) -> web.StreamResponse:
    """Server-sent events of the run (what `logs --follow` reads): the page's script re-reads the page on each."""
    run_id = request.match_info["run_id"]
    after = count("header Last-Event-ID", request.headers.get("Last-Event-ID", "0") or "0")
    await auto.get_run(run_id)
    return await stream_events(request, auto.follow(run_id, after), name="change")


@view
async def partitions(request: web.Request, session: Session, auto) -> web.Response:
    """The grid of a workflow's partitions (its newest 1,000) or of a run's, GRID_PAGE at a time (a cursor)."""
    q = _query(request, {"workflow": ident, "state": ident, "cursor": text})
    target = q.get("workflow")
    doc = None
    if target:
        paged = {"limit": GRID_PAGE, "cursor": q.get("cursor")} if target.startswith("run_") else {}
        doc = await auto.partitions(target, state=q.get("state"), **paged)
    return page(request, "partitions.html", session=session, workflow=target, doc=doc,
                grid=grid(doc["partitions"]) if doc else None)


@view
async def dlq(request: web.Request, session: Session, auto) -> web.Response:
    q = _query(request, {"queue": ident})
    queues = Queues(auto)
    stats = await queues.dlq_stats(q["queue"]) if q.get("queue") else None
    return page(request, "dlq.html", session=session, queues=await queues.stats(), queue=q.get("queue"),
                stats=stats, entries=await queues.dlq_list(q.get("queue"), limit=100), preview=None, filter="")


@view
async def dlq_entry(request: web.Request, session: Session, auto) -> web.Response:
    entry = await Queues(auto).dlq_show(ident("dead letter id", request.match_info["dead_letter_id"]),
                                        with_attempts=True)
    return page(request, "dlq_entry.html", session=session, e=entry)


@view
async def alerts(request: web.Request, session: Session, auto) -> web.Response:
    q = _query(request, {"state": ident})
    return page(request, "alerts.html", session=session, alerts=await Alerts(auto).alerts(state=q.get("state")),
                state=q.get("state"))


@view
async def schedules(request: web.Request, session: Session, auto) -> web.Response:
    return page(request, "schedules.html", session=session, schedules=await schedules_overview(auto))
