"""The aiohttp application: the middlewares (parameters checked, errors in our shape, API tokens and their
scopes), the webhook endpoint, `/metrics`, `/healthz`, the OpenAPI document, and the REST API `/v1/automation`
whose routes http/routes/ declares (docs/api.md, docs/webhooks.md, docs/events.md)."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time

from aiohttp import web

from ..app import gateway
from ..app import metrics as app_metrics
from ..app.contract.endpoints import OPENAPI
from ..app.gateway import MAX_WEBHOOK_BODY, AuthError, Rejection, count, refuse_webhook
from ..app.serve import HttpLimits, HttpSettings, is_loopback
from ..errors import (
    E_BAD_REQUEST,
    E_BODY_TOO_LARGE,
    E_DB_UNAVAILABLE,
    E_FORBIDDEN,
    E_HEADER_DUPLICATED,
    E_HTTP_BIND,
    E_INTERNAL,
    E_METHOD_NOT_ALLOWED,
    E_NOT_FOUND,
    E_REQUEST_TIMEOUT,
    E_TRIGGER_NOT_FOUND,
    E_UNSUPPORTED_MEDIA_TYPE,
    A44Error,
    http_status,
    public_details,
)
from . import routes  # noqa: F401 - declares every REST route in ROUTES
from .approval_links import add_routes as add_approval_links
from .console import add_routes as add_console
from .context import (
    ARCHIVE_KEY,
    AUTOS_KEY,
    LIMITS_KEY,
    MAX_API_BODY,
    PRINCIPAL_KEY,
    SETTINGS_KEY,
    STORE_KEY,
    automation_for,
    error_response,
    incoming_parent,
    json_response,
)
from .limits import STOPPING_KEY, CappedSite, ClientGone, handler_args, read_body
from .metrics import CONTENT_TYPE_LATEST, flush_loop, render_metrics
from .params import PARAMS_KEY, check, params
from .routing import ROUTES, register_all, scope_of

log = logging.getLogger("a44.http")

_A44_HEADERS = ("A44-Signature", "A44-Timestamp", "A44-Idempotency-Key", "Content-Type")

# webhook_rejected_total{reason} of the refusals the webhook endpoint shares with the REST API
_WEBHOOK_REASONS = {E_BODY_TOO_LARGE: "body_too_large", E_REQUEST_TIMEOUT: "body_timeout"}


def a44_error_response(request: web.Request, exc: A44Error) -> web.Response:
    """The answer for an A44Error. A 5xx never carries the error's message (a query name, a PostgreSQL message,
    a database host): that goes to the log, under the correlation id the answer gives."""
    status = http_status(exc.code)
    if status >= 500:
        cid = _log_failure(request, exc.code, str(exc))
        if exc.code == E_DB_UNAVAILABLE:
            return error_response(503, exc.code, f"the database is unavailable; retry shortly (correlation id "
                                                 f"{cid})", headers={"A44-Correlation-Id": cid})
        return _internal(cid)
    resp = error_response(status, exc.code, exc.message, exc.hint,
                          details=exc.details if public_details(exc.code) else None)
    if status in (408, 413):
        resp.force_close()   # the rest of the body is not read
    return resp


def _log_failure(request: web.Request, what: str, detail: str, exc_info: BaseException | None = None) -> str:
    cid = secrets.token_hex(8)
    log.error("E_INTERNAL correlation_id=%s %s %s: %s %s", cid, request.method, request.path, what, detail,
              exc_info=exc_info)
    return cid


def _internal(cid: str) -> web.Response:
    return error_response(500, E_INTERNAL, f"unexpected server error (correlation id {cid})",
                          headers={"A44-Correlation-Id": cid})


@web.middleware
async def guard(request: web.Request, handler):
    """Outermost: parameters checked (params.py) before any handler; every refusal in our error shape; anything
    unexpected a logged line and a bare 500."""
    try:
        try:
            request[PARAMS_KEY] = check(request)
        except A44Error as exc:       # a console page answers a refused path with its own error page
            bad_path = getattr(request.match_info.handler, "bad_path", None)
            if bad_path is None:
                raise
            return await bad_path(request, exc)
        return await handler(request)
    except web.HTTPException as exc:  # aiohttp's own answers: no such route, wrong method
        if exc.status < 400:
            raise
        code = {404: E_NOT_FOUND, 405: E_METHOD_NOT_ALLOWED, 413: E_BODY_TOO_LARGE}.get(exc.status, E_BAD_REQUEST)
        headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return error_response(exc.status, code, exc.reason, headers=headers)
    except A44Error as exc:
        return a44_error_response(request, exc)
    except ClientGone:   # logged by read_body; nobody is left to read an answer
        return error_response(400, E_BAD_REQUEST, "the client closed the connection mid-body")
    except Exception as exc:  # noqa: BLE001 - the last resort: the fuzz suite proves no input gets here
        return _internal(_log_failure(request, type(exc).__name__, str(exc), exc))


# --- webhooks (§9) ---------------------------------------------------------------------------------------------
async def webhook(request: web.Request) -> web.StreamResponse:
    try:
        return await _webhook(request)
    except Rejection as rej:
        headers = {"Allow": "POST"} if rej.status == 405 else None
        return json_response(rej.to_dict(), rej.status, headers)
    except A44Error as exc:
        count("webhook_rejected_total", reason=_WEBHOOK_REASONS.get(exc.code, "unavailable"))
        return a44_error_response(request, exc)


async def _webhook(request: web.Request) -> web.StreamResponse:
    store = request.app[STORE_KEY]
    if request.method != "POST":
        raise refuse_webhook(E_METHOD_NOT_ALLOWED, "method", "webhooks accept POST only")
    project, trigger_id = params(request)["project"], params(request)["trigger"]
    if not project.startswith("pj_"):
        raise refuse_webhook(E_TRIGGER_NOT_FOUND, "not_found", "no such webhook")
    for name in _A44_HEADERS:
        if len(request.headers.getall(name, [])) > 1:
            raise refuse_webhook(E_HEADER_DUPLICATED, "duplicate_header", f"{name} is sent more than once")
    received_at = time.monotonic()
    trigger = await gateway.find_webhook(store, project, trigger_id)
    if trigger is None:
        raise refuse_webhook(E_TRIGGER_NOT_FOUND, "not_found", f"no webhook trigger {trigger_id} in {project}")
    ctype = request.headers.get("Content-Type", "")
    mime, _, ctype_params = ctype.partition(";")
    charset = ctype_params.strip().lower().replace(" ", "")
    if mime.strip().lower() != "application/json" or (charset and charset not in ("charset=utf-8", "charset=\"utf-8\"")):
        raise refuse_webhook(E_UNSUPPORTED_MEDIA_TYPE, "content_type", "Content-Type must be application/json")
    body = await read_body(request, MAX_WEBHOOK_BODY, request.app[LIMITS_KEY].body_timeout)
    return _answer(await gateway.accept_webhook(
        store, project, trigger, timestamp=request.headers.get("A44-Timestamp"),
        signature=request.headers.get("A44-Signature"),
        idempotency_key=request.headers.get("A44-Idempotency-Key"), body=body, received_at=received_at,
        parent=incoming_parent(request)))


def _answer(result: gateway.WebhookResult) -> web.Response:
    return json_response(result.to_dict(), result.status,
                         {"A44-Idempotency-Key-Age": f"{result.key_age_seconds:.3f}",
                          "A44-Deduplicated": "false" if result.created else "true"})


# --- REST API --------------------------------------------------------------------------------------------------
@web.middleware
async def api_auth(request: web.Request, handler):
    path = request.path
    if not path.startswith("/v1/automation") or path == "/v1/automation/openapi.json" \
            or request.match_info.get("project") is not None:
        return await handler(request)
    try:
        principal = await gateway.authenticate(request.app[STORE_KEY], request.headers.get("Authorization"),
                                             request.remote,
                                             scope_of(request.match_info.handler, request.method))
    except AuthError as exc:
        return _auth_refusal(exc)
    asked = request.headers.get("A44-Project")  # the CLI's remote mode says which project it means
    if asked and asked != principal.project_id:
        count("api_rejected_total", reason="project")
        return error_response(http_status(E_FORBIDDEN), E_FORBIDDEN,
                              f"this API token belongs to {principal.project_id}, not {asked}")
    request[PRINCIPAL_KEY] = principal
    return await handler(request)


def _auth_refusal(exc: AuthError) -> web.Response:
    count("api_rejected_total", reason=exc.reason)
    headers = {"WWW-Authenticate": 'Bearer realm="a44"'} if exc.status == 401 else None
    return error_response(exc.status, exc.code, exc.message, headers=headers)


async def openapi(request: web.Request) -> web.Response:
    from .openapi import document

    return json_response(document())


async def metrics(request: web.Request) -> web.Response:
    """Loopback clients only, unless the server requires a token for it (`--metrics-token-required`): then any
    client with a valid `automation:read` token (its CIDRs apply) and nobody without one."""
    if request.app[LIMITS_KEY].metrics_token_required:
        try:
            await gateway.authenticate(request.app[STORE_KEY], request.headers.get("Authorization"), request.remote,
                                     "automation:read")
        except AuthError as exc:
            return _auth_refusal(exc)
    elif not is_loopback(request.remote):
        return error_response(http_status(E_FORBIDDEN), E_FORBIDDEN, "/metrics answers loopback clients only",
                              hint="serve with --metrics-token-required to give it to holders of a read token")
    store = request.app[STORE_KEY]
    await app_metrics.flush_counters(store)     # this process's counts join the totals before they are read
    families = await app_metrics.collect(store)
    return web.Response(body=render_metrics(families), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def health(request: web.Request) -> web.Response:
    return json_response({"ok": True})


def build_app(store, limits: HttpLimits | None = None, log_archive_dir: str | None = None,
              settings=None) -> web.Application:
    app = web.Application(middlewares=[guard, api_auth], client_max_size=MAX_API_BODY)
    app[STORE_KEY] = store
    app[ARCHIVE_KEY] = log_archive_dir
    app[LIMITS_KEY] = limits or HttpLimits()
    app[SETTINGS_KEY] = settings
    app[STOPPING_KEY] = asyncio.Event()
    app[AUTOS_KEY] = {}
    r = app.router
    r.add_get(OPENAPI.path, openapi)
    register_all(r, ROUTES)
    r.add_get("/metrics", metrics)
    r.add_get("/healthz", health)
    r.add_route("*", "/v1/{project}/{trigger}", webhook)
    add_console(app, store_key=STORE_KEY, automation_for=automation_for, principal_key=PRINCIPAL_KEY)
    add_approval_links(app, store_key=STORE_KEY)

    async def _stopping(app):
        app[STOPPING_KEY].set()   # open event streams end (until_gone) instead of holding the shutdown

    async def _close(app):
        for auto in app[AUTOS_KEY].values():
            await auto.close()
    app.on_shutdown.append(_stopping)
    app.cleanup_ctx.append(flush_loop(store))
    app.on_cleanup.append(_close)
    return app


class HttpServer:
    """Runs the application on settings.host:settings.port inside the current event loop (`app.serve()`, tests).
    Port 0 picks a free one (`port` then says which)."""

    def __init__(self, store, settings: HttpSettings | None = None):
        self.store = store
        self.settings = settings or HttpSettings()
        self.host, self.port = self.settings.host, self.settings.port
        self._runner: web.AppRunner | None = None

    async def start(self) -> HttpServer:
        limits = self.settings.limits
        app = build_app(self.store, limits, self.settings.log_archive_dir, self.settings.settings)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     **handler_args(limits))
        await self._runner.setup()
        site = CappedSite(self._runner, self.host, self.port, limits.max_connections, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await self.stop()
            raise A44Error(E_HTTP_BIND, f"cannot listen on {self.host}:{self.port}: {exc.strerror}") from None
        if self.port == 0:
            self.port = self._runner.addresses[0][1]
        logging.getLogger("a44.lifecycle").info("http listening on %s", self.url)
        return self

    @property
    def open_connections(self) -> int:
        return len(self._runner.server.connections) if self._runner and self._runner.server else 0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
