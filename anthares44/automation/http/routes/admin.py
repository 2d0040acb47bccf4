"""The project's administration over REST: API tokens (admin scope), webhook secrets (admin scope), installed
connectors, metrics as JSON, schedule previews of uploaded files. Each handler is the CLI verb's call."""

from __future__ import annotations

import asyncio

from aiohttp import web

from ...app.admin import Admin, schedule_preview
from ...app.contract import endpoints as ep
from ...app.contract.models import admin as am
from ..context import STORE_KEY, json_response, principal, read_model, uploaded
from ..params import params
from ..routing import ADMIN, READ, route


def _admin(request: web.Request) -> Admin:
    return Admin(request.app[STORE_KEY], principal(request).project_id)


@route(ep.WHOAMI, "the calling token (never the token itself)", tag="admin")
async def api_whoami(request: web.Request) -> web.Response:
    """The calling token (never the token itself): what `a44 auth status` shows."""
    p = principal(request)
    return json_response({"token_id": p.token_id, "name": p.name, "project_id": p.project_id,
                          "scopes": sorted(p.scopes), "expires_at": p.expires_at})


@route(ep.TOKENS, "the project's API tokens, never the token itself (as `auth token list`)", scope=ADMIN, tag="admin")
async def api_tokens(request: web.Request) -> web.Response:
    return json_response({"tokens": await _admin(request).tokens()})


@route(ep.TOKEN_CREATE, "create an API token of the project, shown once (as `auth token create`)",
       scope=ADMIN, body=am.TokenRequest, tag="admin")
async def api_token_create(request: web.Request) -> web.Response:
    b = await read_model(request, am.TokenRequest)
    tok = await _admin(request).create_token(b.name, list(b.scopes), b.expires, list(b.allow_cidrs))
    return json_response(tok.to_dict(), 201)


@route(ep.TOKEN_REVOKE, "revoke an API token (as `auth token revoke`)", scope=ADMIN, errors=(404,), tag="admin")
async def api_token_revoke(request: web.Request) -> web.Response:
    token_id = params(request)["token_id"]
    await _admin(request).revoke_token(token_id)
    return json_response({"revoked": token_id})


@route(ep.WEBHOOK_SECRET, "a webhook trigger's secret, shown once (as `webhook "
       "secret`)", scope=ADMIN, errors=(404, 409), tag="admin")
async def api_webhook_secret(request: web.Request) -> web.Response:
    trigger = params(request)["trigger"]
    return json_response({"trigger_id": trigger, "secret": await _admin(request).webhook_secret(trigger)})


@route(ep.WEBHOOK_ROTATE, "add a new webhook secret; the previous one stays valid "
       "48 h more (as `webhook rotate`)", scope=ADMIN, errors=(404,), tag="admin")
async def api_webhook_rotate(request: web.Request) -> web.Response:
    return json_response(await _admin(request).rotate_webhook_secret(params(request)["trigger"]))


@route(ep.CONNECTORS, "the installed connectors and where each comes from (as `connectors "
       "list`)", tag="admin")
async def api_connectors(request: web.Request) -> web.Response:
    from ...app.connectors import installed

    return json_response({"connectors": await asyncio.to_thread(installed)})


@route(ep.METRICS, "the samples of GET /metrics as JSON, read from the database (as `metrics "
       "--format json`), of the token's project and of no project; name: a prefix", query=("name",), tag="admin")
async def api_metrics(request: web.Request) -> web.Response:
    return json_response({"metrics": await _admin(request).metrics(params(request).get("name"))})


@route(ep.SCHEDULES_PREVIEW, "the firings of the schedule triggers of uploaded files over a "
       "window, before publishing (as `schedule preview --format json`); nothing is stored", scope=READ,
       body=am.SchedulePreviewRequest, errors=(404, 413), tag="admin")
async def api_schedule_preview(request: web.Request) -> web.Response:
    b = await read_model(request, am.SchedulePreviewRequest)
    with uploaded(b.files) as (root, rel):
        doc = await asyncio.to_thread(schedule_preview, [str(root)], b.trigger, b.from_, b.to)
    for d in doc["diagnostics"]:
        d["file"] = rel(d["file"])
    return json_response(doc, 200 if doc.pop("ok") else 422)
