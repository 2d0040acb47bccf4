"""Who is looking at the console, and whether a form was posted by the console itself.

The session is the API token the operator typed into the login form, kept in an HttpOnly, SameSite=Strict cookie
(Secure over TLS) and checked on every request exactly as the REST API checks `Authorization: Bearer` (scope,
expiry, allowed networks): GET pages need `automation:read`, POST actions `automation:write`.

Every POST carries a CSRF field: an HMAC, under a key drawn when the server starts, of the session token (or,
before login, of a random pre-session cookie). A cross-site page can neither read it nor compute it; a cookie set
by another service on the same host (cookies ignore ports) does not help either, since the HMAC key never leaves
this process. A restart draws a new key: forms of pages rendered before it are refused and simply re-rendered.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import quote

from aiohttp import web

from ...app import gateway
from ...errors import E_BODY_TOO_LARGE, E_CSRF_INVALID, E_FORBIDDEN, A44Error

SESSION_COOKIE = "a44_console"
PRESESSION_COOKIE = "a44_console_pre"
CSRF_FIELD = "csrf"
MAX_FORM = 64 * 1024


@dataclass
class Keys:
    csrf: bytes

    @classmethod
    def fresh(cls) -> Keys:
        return cls(secrets.token_bytes(32))


def csrf_for(keys: Keys, session_value: str) -> str:
    return hmac.new(keys.csrf, session_value.encode(), hashlib.sha256).hexdigest()


def cookie_args(request: web.Request) -> dict:
    return {"httponly": True, "samesite": "Strict", "secure": request.secure, "path": "/"}


def safe_next(target: str | None) -> str:
    """Where to go after login: a path of this server only (no `//host`, no scheme, no backslash tricks)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target \
            or not target.isprintable():
        return "/runs"
    return target


def to_login(request: web.Request) -> web.Response:
    return web.Response(status=303, headers={"Location": f"/login?next={quote(request.path_qs, safe='')}"})


async def read_form(request: web.Request) -> dict[str, str]:
    if request.content_length is not None and request.content_length > MAX_FORM:
        raise A44Error(E_BODY_TOO_LARGE, f"a console form is at most {MAX_FORM} bytes")
    form = await request.post()
    return {k: v for k, v in form.items() if isinstance(v, str)}


def check_csrf(keys: Keys, session_value: str | None, form: dict[str, str]) -> None:
    sent = form.get(CSRF_FIELD, "")
    if not session_value or not hmac.compare_digest(sent.encode(), csrf_for(keys, session_value).encode()):
        raise A44Error(E_CSRF_INVALID, "this form's CSRF token is missing or wrong; nothing was changed",
                       hint="reload the page and submit the form again")


@dataclass
class Session:
    principal: object
    token: str
    csrf: str
    form: dict[str, str]


def scope_of(request: web.Request) -> str:
    return "automation:read" if request.method in ("GET", "HEAD") else "automation:write"


async def authenticate(request: web.Request, store, keys: Keys) -> Session | web.Response:
    """The session of the request, or the answer that replaces the page: to the login form without a valid
    cookie; E_FORBIDDEN (403) for a token without the scope; E_CSRF_INVALID (403) for a POST without its token."""
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        return to_login(request)
    form = await read_form(request) if request.method == "POST" else {}
    try:
        principal = await gateway.authenticate(store, f"Bearer {token}", request.remote, "automation:read")
    except gateway.AuthError as exc:
        if exc.status == 401:
            resp = to_login(request)
            resp.del_cookie(SESSION_COOKIE, path="/")
            return resp
        raise A44Error(E_FORBIDDEN, exc.message) from None
    if request.method == "POST":
        check_csrf(keys, token, form)
        # a decision on an approval needs the approve scope only (§20: approvers need no write rights)
        needed = "automation:approve" if request.path.endswith("/approve") else "automation:write"
        if not principal.allows(needed):
            raise A44Error(E_FORBIDDEN, f"the token {principal.name!r} may read but not act "
                                        f"(it lacks the {needed} scope)")
    return Session(principal, token, csrf_for(keys, token), form)
