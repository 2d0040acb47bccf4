"""One-click approval links (§20, docs/approvals.md) on the HTTP plane, outside the token-checked REST API: the link
itself is the credential (signed, bound to one run, step, person and expiry, single-use: runtime/approvals/links.py).

    GET  /approvals/links/{token}   a confirm page: what the link decides and a form; it changes nothing (mail
                                    scanners that fetch every link must not decide)
    POST /approvals/links/{token}   the decision (form fields `decision`, `comment`), once

A refused link (altered, forged, expired, used, closed, not an approver...) is an HTML page with the error's own
status (403, 404, 409, 410), never a 5xx. Pages are not cached and send no referrer (the token is in the URL)."""

from __future__ import annotations

import html

from aiohttp import web

from ..app.approvals import LINK_PATH as PATH
from ..app.approvals import MAX_COMMENT, link_decide, link_view
from ..errors import E_APPROVAL_INVALID, A44Error, http_status
from .limits import ClientGone

MAX_FORM = 16 * 1024          # a decision and a 4000-character comment, form-encoded, with room to spare
HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
           "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"}


def _page(title: str, body: str, status: int = 200) -> web.Response:
    doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
           f"<body style='font-family:sans-serif;max-width:40em;margin:2em auto'><h1>{html.escape(title)}</h1>"
           f"{body}</body></html>")
    return web.Response(text=doc, status=status, content_type="text/html", headers=HEADERS)


def _refused(exc: A44Error) -> web.Response:
    hint = f"<p>{html.escape(exc.hint)}</p>" if exc.hint else ""
    return _page("This link cannot decide", f"<p><code>{html.escape(exc.code)}</code>: "
                                            f"{html.escape(exc.message)}</p>{hint}", http_status(exc.code))


def add_routes(app: web.Application, *, store_key) -> None:
    async def confirm(request: web.Request) -> web.Response:
        try:
            v = await link_view(request.app[store_key], request.match_info["token"])
        except A44Error as exc:
            return _refused(exc)
        q = v["request"] or {}
        e = html.escape
        state = q.get("state", "unknown")
        facts = (f"<p>Run <code>{e(v['run_id'])}</code>, step <code>{e(v['step'])}</code>, as "
                 f"<b>{e(v['person'])}</b>. The request is <b>{e(state)}</b>; it needs {q.get('min_approvals', '?')} "
                 f"approval(s) and closes at {e(str(q.get('timeout_at')))}.</p>")
        if state != "open":
            return _page("Approval closed", facts)
        form = (f"<form method='post'><p><label>Comment<br><textarea name='comment' maxlength='{MAX_COMMENT}' "
                f"rows='4' cols='60'></textarea></label></p>"
                "<button name='decision' value='approve'>Approve</button> "
                "<button name='decision' value='reject'>Reject</button></form>")
        return _page("Confirm your decision", facts + "<p>Nothing is decided until you press a button.</p>" + form)

    async def decide(request: web.Request) -> web.Response:
        try:
            if request.content_length is not None and request.content_length > MAX_FORM:
                raise A44Error(E_APPROVAL_INVALID, f"the form is over {MAX_FORM} bytes")
            try:
                raw = await request.content.read(MAX_FORM + 1)
            except (ClientGone, ConnectionError):
                raise A44Error(E_APPROVAL_INVALID, "the form could not be read") from None
            if len(raw) > MAX_FORM:
                raise A44Error(E_APPROVAL_INVALID, f"the form is over {MAX_FORM} bytes")
            from urllib.parse import parse_qs

            form = parse_qs(raw.decode("utf-8", "replace"), max_num_fields=8)
            decision = (form.get("decision") or [""])[0]
            comment = (form.get("comment") or [""])[0] or None
            done = await link_decide(request.app[store_key], request.match_info["token"], decision, comment=comment)
        except A44Error as exc:
            return _refused(exc)
        except ValueError:      # parse_qs: too many fields
            return _refused(A44Error(E_APPROVAL_INVALID, "the form is not a decision"))
        e = html.escape
        return _page("Decision recorded", f"<p><b>{e(done['person'])}</b>: {e(str(done['decision']))} on run "
                                          f"<code>{e(done['run_id'])}</code> step <code>{e(done['step'])}</code> "
                                          f"({e(done['outcome'])}).</p>")

    app.router.add_get(PATH + "{token}", confirm)
    app.router.add_post(PATH + "{token}", decide)
