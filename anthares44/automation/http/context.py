"""What a REST handler reads from its request and application: the app keys, the calling token, the project's
`Automation`, the JSON body (validated by a pydantic model), and the JSON answer in our error shape."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from ..app import gateway
from ..app.serve import HttpLimits
from ..errors import E_INVALID_ARGUMENT, A44Error
from ..jsonenc import to_json
from ..tracing import Parent, parse_traceparent
from .limits import read_body

STORE_KEY = web.AppKey("store", object)
AUTOS_KEY = web.AppKey("autos", dict)
ARCHIVE_KEY = web.AppKey("log_archive_dir", object)
LIMITS_KEY = web.AppKey("limits", HttpLimits)
SETTINGS_KEY = web.AppKey("settings", object)   # settings.Settings of the serving process, or None (defaults)
PRINCIPAL_KEY = web.RequestKey("principal", object) if hasattr(web, "RequestKey") else "principal"
MAX_API_BODY = 8 * 1024 * 1024

M = TypeVar("M", bound=BaseModel)


def json_response(doc: Any, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(text=to_json(doc, indent=None), status=status, content_type="application/json",
                        headers=headers)


def error_response(status: int, code: str, message: str, hint: str | None = None,
                   headers: dict | None = None, details: dict | None = None) -> web.Response:
    err = {"code": code, "message": message}
    if hint:
        err["hint"] = hint
    if details:
        err["details"] = details
    return json_response({"error": err}, status, headers)


def principal(request: web.Request):
    return request[PRINCIPAL_KEY]


def automation_for(request: web.Request):
    from ..app.automation import Automation

    project = request[PRINCIPAL_KEY].project_id
    autos = request.app[AUTOS_KEY]
    if project not in autos:
        where = request.app[ARCHIVE_KEY]
        autos[project] = Automation(request.app[STORE_KEY], project, archive_dir=Path(where) if where else None)
    return autos[project]


def settings_for(request: web.Request):
    from ..settings import Settings

    return request.app[SETTINGS_KEY] or Settings()


async def read_json(request: web.Request) -> Any:
    raw = await read_body(request, MAX_API_BODY, request.app[LIMITS_KEY].body_timeout)
    try:
        return gateway.parse_json(raw) if raw else {}
    except ValueError as exc:
        raise A44Error(E_INVALID_ARGUMENT, f"the body is not valid JSON: {exc}") from None


async def read_model(request: web.Request, model: type[M]) -> M:
    """The body as `model`, or 400 E_INVALID_ARGUMENT naming every wrong field (never pydantic's text with the
    input echoed back, never a 500)."""
    doc = await read_json(request)
    return validated(model, doc)


def json_object(doc: Any) -> dict:
    if not isinstance(doc, dict):
        raise A44Error(E_INVALID_ARGUMENT, "the body must be a JSON object")
    return doc


def incoming_parent(request: web.Request) -> Parent | None:
    """The W3C trace context the client sent: the parent of the trace of the run the request creates (an invalid
    or repeated header is ignored, as W3C asks)."""
    values = request.headers.getall("traceparent", [])
    return parse_traceparent(values[0], request.headers.get("tracestate")) if len(values) == 1 else None


def validated(model: type[M], doc: Any) -> M:
    if not isinstance(doc, dict):
        raise A44Error(E_INVALID_ARGUMENT, "the body must be a JSON object")
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                    for e in exc.errors(include_url=False, include_input=False)]
        raise A44Error(E_INVALID_ARGUMENT, "invalid body: " + "; ".join(problems[:10]),
                       hint=f"see components.schemas.{model.__name__} in GET /v1/automation/openapi.json") from None


def _bad_name(rel: str, exc: Exception) -> A44Error:
    # strerror, not str(exc): that names the server's temporary directory
    return A44Error(E_INVALID_ARGUMENT, f"{rel!r} cannot be a file name: {getattr(exc, 'strerror', None) or exc}")


@contextlib.contextmanager
def uploaded(files: dict[str, str]) -> Iterator[tuple[Path, Callable[[Any], Any]]]:
    """The uploaded `files` (relative path -> text) written under a temporary directory, and the function that
    turns a path under it back into the name the client sent (never the server's directory)."""
    with tempfile.TemporaryDirectory(prefix="a44-upload-") as tmp:
        root = Path(tmp)
        for rel, text in files.items():
            try:
                target = (root / rel).resolve()
            except (OSError, ValueError) as exc:
                raise _bad_name(rel, exc) from None
            if root.resolve() not in target.parents:
                raise A44Error(E_INVALID_ARGUMENT, f"{rel!r} is not a relative path inside the project")
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            except (OSError, ValueError) as exc:   # a NUL, a name too long, a path through a file
                raise _bad_name(rel, exc) from None

        def rel(f):
            return os.path.relpath(f, str(root)) if isinstance(f, str) and f.startswith(str(root)) else f
        yield root, rel
