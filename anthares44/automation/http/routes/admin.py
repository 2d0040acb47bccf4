"""The project's administration over REST: API tokens (admin scope), webhook secrets (admin scope), installed
connectors, metrics as JSON, schedule previews of uploaded files. Each handler is the CLI verb's call."""

from __future__ import annotations

import asyncio

from aiohttp import web

from ...durations import parse_duration
from ...errors import E_INVALID_ARGUMENT, E_TRIGGER_NOT_FOUND, A44Error
from ...runtime.ingestion import tokens, triggers
from ..context import STORE_KEY, json_response, principal, read_model, uploaded
from ..models import admin as am
from ..params import params
from ..routing import ADMIN, READ, route


def _project(request: web.Request) -> str:
    return principal(request).project_id


@route("GET", "/v1/automation/tokens", "the project's API tokens, never the token itself (as `auth token list`)",
       scope=ADMIN, answers={200: am.Tokens}, tag="admin")
async def api_tokens(request: web.Request) -> web.Response:
    return json_response({"tokens": await tokens.list_tokens(request.app[STORE_KEY], _project(request))})


@route("POST", "/v1/automation/tokens", "create an API token of the project, shown once (as `auth token create`)",
       scope=ADMIN, body=am.TokenRequest, answers={201: am.NewToken}, tag="admin")
async def api_token_create(request: web.Request) -> web.Response:
    b = await read_model(request, am.TokenRequest)
    try:
        expires = None if b.expires in (None, "never", "none") else parse_duration(b.expires)
    except ValueError as exc:
        raise A44Error(E_INVALID_ARGUMENT, f"expires: {exc}") from None
    tok = await tokens.create_token(request.app[STORE_KEY], _project(request), b.name, list(b.scopes), expires,
                                    list(b.allow_cidrs))
    return json_response(tok.to_dict(), 201)


@route("DELETE", "/v1/automation/tokens/{token_id}", "revoke an API token (as `auth token revoke`)", scope=ADMIN,
       answers={200: am.Revoked}, errors=(404,), tag="admin")
async def api_token_revoke(request: web.Request) -> web.Response:
    token_id = params(request)["token_id"]
    await tokens.revoke_token(request.app[STORE_KEY], _project(request), token_id)
    return json_response({"revoked": token_id})


@route("POST", "/v1/automation/webhooks/{trigger}/secret", "a webhook trigger's secret, shown once (as `webhook "
       "secret`)", scope=ADMIN, answers={200: am.WebhookSecret}, errors=(404, 409), tag="admin")
async def api_webhook_secret(request: web.Request) -> web.Response:
    trigger = params(request)["trigger"]
    secret = await triggers.reveal_secret(request.app[STORE_KEY], _project(request), trigger)
    return json_response({"trigger_id": trigger, "secret": secret})


@route("POST", "/v1/automation/webhooks/{trigger}/rotate", "add a new webhook secret; the previous one stays valid "
       "48 h more (as `webhook rotate`)", scope=ADMIN, answers={200: am.RotatedSecret}, errors=(404,), tag="admin")
async def api_webhook_rotate(request: web.Request) -> web.Response:
    return json_response(await triggers.rotate_secret(request.app[STORE_KEY], _project(request),
                                                      params(request)["trigger"]))


@route("GET", "/v1/automation/connectors", "the installed connectors and where each comes from (as `connectors "
       "list`)", answers={200: am.Connectors}, tag="admin")
async def api_connectors(request: web.Request) -> web.Response:
    from ...app.connectors import installed

    return json_response({"connectors": await asyncio.to_thread(installed)})


@route("GET", "/v1/automation/metrics", "the samples of GET /metrics as JSON, read from the database (as `metrics "
       "--format json`), of the token's project and of no project; name: a prefix", answers={200: am.Metrics},
       query=("name",), tag="admin")
async def api_metrics(request: web.Request) -> web.Response:
    from ...app.metrics import as_rows, collect

    prefix, project = params(request).get("name"), _project(request)
    rows = as_rows(await collect(request.app[STORE_KEY]))
    # another project's queue and workflow names are not this token's to read
    return json_response({"metrics": [r for r in rows if (not prefix or r["name"].startswith(prefix))
                                      and r["labels"].get("project", project) == project]})


@route("POST", "/v1/automation/schedules/preview", "the firings of the schedule triggers of uploaded files over a "
       "window, before publishing (as `schedule preview --format json`); nothing is stored", scope=READ,
       body=am.SchedulePreviewRequest, answers={200: am.SchedulePreview, 422: am.SchedulePreview},
       errors=(404, 413), tag="admin")
async def api_schedule_preview(request: web.Request) -> web.Response:
    from ...compiler.lint import lint_paths
    from ...diagnostics import has_errors
    from ...runtime.scheduling.occurrences import ScheduleError
    from ...runtime.scheduling.preview import preview, schedule_triggers

    b = await read_model(request, am.SchedulePreviewRequest)
    with uploaded(b.files) as (root, rel):
        result = await asyncio.to_thread(lint_paths, [str(root)], lower=True)
        diagnostics = [{**d.to_dict(), "file": rel(d.file)} for d in result.diagnostics]
    if has_errors(result.diagnostics):
        return json_response({"triggers": [], "diagnostics": diagnostics}, 422)
    found = [t for t in schedule_triggers(result.irs) if b.trigger is None or t.id == b.trigger]
    if not found:
        raise A44Error(E_TRIGGER_NOT_FOUND, f"no schedule trigger {b.trigger!r} in the files" if b.trigger
                       else "no schedule trigger in the files")
    try:
        previews = [preview(t, b.from_, b.to) for t in found]
    except (ScheduleError, ValueError) as exc:
        raise A44Error(E_INVALID_ARGUMENT, str(exc)) from None
    return json_response({"triggers": [p.to_dict() for p in previews], "diagnostics": diagnostics})
