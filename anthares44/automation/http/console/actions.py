"""The console's actions (POST, each with its CSRF token): sign in and out, replay a run from a step or re-run
its failed partitions (a dry-run preview first, then the confirmed replay under the preview's request id, so a
form sent twice replays once), resolve an exclusive step, skip, cancel, redrive dead letters (preview, then confirm).
Each answers with a redirect to the page that shows the outcome, or with the preview page."""

from __future__ import annotations

import secrets

from aiohttp import web

from ...app import gateway
from ...app.inspection import run_detail
from ...app.queues import Queues
from ...app.replay import replay as replay_runs
from ...errors import E_INVALID_ARGUMENT, A44Error
from ..params import count, ident, text
from .auth import PRESESSION_COOKIE, SESSION_COOKIE, Session, check_csrf, cookie_args, csrf_for, read_form, safe_next
from .pages import run_context
from .render import console, page, refusal, see_other, view


def _field(form: dict, name: str, parse=text, *, required: bool = False):
    raw = form.get(name, "").strip()
    if raw == "":
        if required:
            raise A44Error(E_INVALID_ARGUMENT, f"the form field {name!r} is required")
        return None
    return parse(f"form field {name}", raw)


async def login(request: web.Request) -> web.Response:
    """The token typed in becomes the session cookie once it authenticates with at least the read scope."""
    c = console(request)
    form = await read_form(request)
    try:
        check_csrf(c.keys, request.cookies.get(PRESESSION_COOKIE), form)
    except A44Error as exc:
        return refusal(request, exc)
    token = form.get("token", "").strip()
    target = safe_next(form.get("next"))
    try:
        await gateway.authenticate(request.app[c.store_key], f"Bearer {token}", request.remote, "automation:read")
    except gateway.AuthError as exc:
        pre = request.cookies.get(PRESESSION_COOKIE, "")
        return page(request, "login.html", 401 if exc.status == 401 else 403, next=target,
                    csrf=csrf_for(c.keys, pre), failed=exc.message)
    resp = see_other(target)
    resp.set_cookie(SESSION_COOKIE, token, **cookie_args(request))
    resp.del_cookie(PRESESSION_COOKIE, path="/")
    return resp


async def logout(request: web.Request) -> web.Response:
    """Any signed-in token may sign out (a read-only one too): only the form's CSRF token is required."""
    try:
        check_csrf(console(request).keys, request.cookies.get(SESSION_COOKIE), await read_form(request))
    except A44Error as exc:
        return refusal(request, exc)
    resp = see_other("/login")
    resp.del_cookie(SESSION_COOKIE, path="/")
    return resp


@view
async def replay(request: web.Request, session: Session, auto) -> web.Response:
    run_id = request.match_info["run_id"]
    form = session.form
    failed_partitions = form.get("cut") == "failed_partitions"
    from_step = None if failed_partitions else _field(form, "from_step", ident, required=True)
    confirm = form.get("confirm") == "1"
    request_id = _field(form, "request_id", ident) if confirm else f"console-{secrets.token_hex(8)}"
    doc = await replay_runs(auto, [run_id], from_step=from_step, failed_partitions=failed_partitions,
                            dry_run=not confirm, request_id=request_id)
    if confirm:
        return see_other(f"/runs/{run_id}")
    detail = await run_detail(auto, run_id)
    return page(request, "run.html", session=session, preview=doc, preview_request=request_id,
                preview_step=from_step, preview_cut="failed_partitions" if failed_partitions else "from_step",
                **run_context(auto, detail, request))


@view
async def resolve(request: web.Request, session: Session, auto) -> web.Response:
    run_id = request.match_info["run_id"]
    form = session.form
    await auto.resolve(run_id, _field(form, "step", ident, required=True),
                       _field(form, "outcome", ident, required=True), by=f"token:{session.principal.name}")
    return see_other(f"/runs/{run_id}")


@view
async def skip(request: web.Request, session: Session, auto) -> web.Response:
    run_id = request.match_info["run_id"]
    form = session.form
    await auto.skip(run_id, partition=_field(form, "partition"), step=_field(form, "step", ident),
                    reason=_field(form, "reason", required=True), by=f"token:{session.principal.name}")
    return see_other(f"/runs/{run_id}")


@view
async def cancel(request: web.Request, session: Session, auto) -> web.Response:
    run_id = request.match_info["run_id"]
    form = session.form
    await auto.cancel(run_id, by=f"token:{session.principal.name}", reason=_field(form, "reason"),
                      compensate=form.get("compensate") == "1")
    return see_other(f"/runs/{run_id}")


@view
async def approve(request: web.Request, session: Session, auto) -> web.Response:
    """A decision on the run's approval step as the signed-in token's name (docs/approvals.md)."""
    run_id = request.match_info["run_id"]
    form = session.form
    comment = form.get("comment", "").strip() or None
    person: str = session.principal.name  # type: ignore[attr-defined]  # Session.principal is typed object
    await auto.approve(run_id, _field(form, "step", ident, required=True),
                       _field(form, "decision", ident, required=True), person=person, via="console",
                       comment=comment)
    return see_other(f"/runs/{run_id}")


@view
async def redrive(request: web.Request, session: Session, auto) -> web.Response:
    form = session.form
    queue = _field(form, "queue", ident, required=True)
    flt = form.get("filter", "").strip() or None
    if flt is not None and len(flt) > 2000:
        raise A44Error(E_INVALID_ARGUMENT, "the filter is at most 2000 characters")
    most = _field(form, "max", count)
    confirm = form.get("confirm") == "1"
    queues = Queues(auto)
    report = await queues.dlq_redrive(queue, filter=flt, max=most, dry_run=not confirm)
    if confirm:
        return see_other(f"/dlq?queue={queue}&redriven={report.redriven}")
    return page(request, "dlq.html", session=session, queues=await queues.stats(), queue=queue,
                stats=await queues.dlq_stats(queue), entries=await queues.dlq_list(queue, limit=100),
                preview=report.to_dict(), filter=flt or "", max=most)
