"""Every REST answer served in the tests is checked against its route's declaration (http/routing.py): a JSON
answer of a declared status validates against the status's model, an error answer against the error document and
its status is one the route declares (openapi.json documents it). A test whose server answered otherwise fails.

The check is a middleware, outermost, added to every application `http.server.build_app` builds while a test
runs, so it sees what the client receives: the live servers of tests/rest, tests/ingestion, the CLI's remote
verbs and the in-process daemons. Servers started in a subprocess (`a44 automation serve`) are not seen."""

from __future__ import annotations

import pytest

# what the servers of the running test answered off their declaration: "METHOD path: what"
MISMATCHES: list[str] = []


def mismatch(request, status: int, body: bytes, content_type: str) -> str | None:
    """What is wrong with this answer, or None. Only routes of the table are checked."""
    from pydantic import BaseModel, ValidationError

    from anthares44.automation.app.contract.models.common import Error
    from anthares44.automation.http.routing import route_of

    r = route_of(request.match_info.handler)
    if r is None or 300 <= status < 400:
        return None
    declared = r.answers.get(status)
    if declared is None and status >= 400:
        if status not in r.errors:
            return f"answered {status}, which the route does not declare (errors={r.errors})"
        declared = Error
    if declared is None:
        return f"answered {status}, which the route does not declare (answers={sorted(r.answers)})"
    if not (isinstance(declared, type) and issubclass(declared, BaseModel)):
        return None   # another media type, described in words (an event stream, a text page)
    if "application/json" not in content_type:
        return f"answered {status} as {content_type!r}, not the JSON of {declared.__name__}"
    try:
        declared.model_validate_json(body)
    except ValidationError as exc:
        return f"{status} does not match {declared.__name__}: {exc}"
    return None


def _middleware():
    from aiohttp import web

    @web.middleware
    async def check_answer(request, handler):
        try:
            resp = await handler(request)
        except web.HTTPException as exc:
            _record(request, exc)
            raise
        _record(request, resp)
        return resp
    return check_answer


def _record(request, resp) -> None:
    from aiohttp import web

    if not isinstance(resp, web.Response) or resp.prepared:   # a stream went out as it was written
        return
    body = resp.body if isinstance(resp.body, bytes) else (resp.text or "").encode()
    wrong = mismatch(request, resp.status, body, resp.content_type or "")
    if wrong:
        MISMATCHES.append(f"{request.method} {request.path}: {wrong}")


@pytest.fixture(autouse=True)
def rest_answers_match_their_models(monkeypatch):
    from anthares44.automation.http import server

    build = server.build_app

    def checked_app(*args, **kwargs):
        app = build(*args, **kwargs)
        app.middlewares.insert(0, _middleware())
        return app
    monkeypatch.setattr(server, "build_app", checked_app)
    MISMATCHES.clear()
    yield
    found, MISMATCHES[:] = list(MISMATCHES), []
    assert not found, "REST answers off their route's declaration:\n" + "\n".join(found[:20])
