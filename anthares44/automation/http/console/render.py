"""Templates and the wrapper every console handler goes through: authentication (auth.py), the principal set for
`automation_for`, and a refusal rendered as a page with the status errors.py gives its code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from ...errors import E_NOT_FOUND, E_RUN_NOT_FOUND, A44Error, http_status
from ...jsonenc import iso, to_json
from .auth import CSRF_FIELD, Keys, Session, authenticate

TEMPLATES = Path(__file__).parent / "templates"


@dataclass
class Console:
    keys: Keys
    env: jinja2.Environment
    store_key: Any
    automation_for: Callable
    principal_key: Any


CONSOLE_KEY = web.AppKey("console", Console)


def _when(value) -> str:
    return iso(value).replace("T", " ").rstrip("Z")[:19] if value is not None and hasattr(value, "tzinfo") \
        else ("" if value is None else str(value))


def _duration(value) -> str:
    if value is None:
        return ""
    return f"{value} ms" if value < 10_000 else f"{value / 1000:.1f} s"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(when=_when, duration=_duration, pretty=lambda v: to_json(v, indent=2), iso=iso)
    env.globals["csrf_field"] = CSRF_FIELD
    return env


def console(request: web.Request) -> Console:
    return request.app[CONSOLE_KEY]


def page(request: web.Request, template: str, status: int = 200, session: Session | None = None,
         **context) -> web.Response:
    html = console(request).env.get_template(template).render(
        session=session, path=request.path, **context)
    return web.Response(text=html, status=status, content_type="text/html", headers=SECURITY_HEADERS)


# No script but our own file, no framing, no referrer leaking run ids to a tracing UI
SECURITY_HEADERS = {"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                                               "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
                    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                    "Cache-Control": "no-store"}


def see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location, **SECURITY_HEADERS})


def refusal(request: web.Request, exc: A44Error, session: Session | None = None) -> web.Response:
    """A user's mistake or a refused request as the error page; 5xx go on to the server's guard, which logs them
    under a correlation id and says nothing of the cause."""
    status = http_status(exc.code)
    if status >= 500:
        raise exc
    return page(request, "error.html", status, session, error=exc)


def view(fn: Callable) -> Callable:
    """A console handler `fn(request, session, auto)`: signed in (else the login form), the principal's
    Automation, an A44Error rendered as the error page (5xx go to the server's guard, which logs them)."""
    async def handler(request: web.Request) -> web.StreamResponse:
        c = console(request)
        session = None
        try:
            got = await authenticate(request, request.app[c.store_key], c.keys)
            if isinstance(got, web.StreamResponse):
                return got
            session = got
            request[c.principal_key] = session.principal
            return await fn(request, session, c.automation_for(request))
        except A44Error as exc:
            return refusal(request, exc, session)

    async def bad_path(request: web.Request, exc: A44Error) -> web.StreamResponse:
        """A path segment that cannot be an id (the server's guard refused it) names nothing: the console's 404
        page, as for an id that names nothing, never the REST API's JSON."""
        c = console(request)
        got = await authenticate(request, request.app[c.store_key], c.keys)
        if isinstance(got, web.StreamResponse):
            return got
        what = "no run has that id" if "run_id" in request.match_info else "no such page"
        return refusal(request, A44Error(E_RUN_NOT_FOUND if "run_id" in request.match_info else E_NOT_FOUND,
                                         what, hint=exc.message), got)

    handler.__name__ = fn.__name__
    handler.__doc__ = fn.__doc__
    handler.bad_path = bad_path       # the server's guard hands it a refused path (server.guard)
    return handler
