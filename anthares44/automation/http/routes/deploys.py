"""Deploys over REST (§23, docs/deploys.md): the plan of a publish (nothing stored), moving open runs to a newer
version, a workflow's versions with their open runs, retiring a drained version. Each handler is the CLI verb's
`Automation` call."""

from __future__ import annotations

from aiohttp import web

from ...app.contract import endpoints as ep
from ...app.contract.models import deploys as dm
from ..context import automation_for, json_response, read_model, uploaded
from ..params import params
from ..routing import route
from .runs import _token


@route(ep.PUBLISH_PLAN, "the deploy plan of workflow files (as `publish --plan`): every open run of older versions "
       "classified compatible, mappable or blocked; nothing is stored", body=dm.PlanRequest, errors=(408, 413),
       tag="deploys")
async def api_publish_plan(request: web.Request) -> web.Response:
    b = await read_model(request, dm.PlanRequest)
    with uploaded(b.files) as (root, rel):
        report = await automation_for(request).publish_plan([str(root)])
        doc = report.to_dict()
    doc["files"] = [rel(f) for f in doc["files"]]
    for item in doc["diagnostics"]:
        item["file"] = rel(item.get("file"))
    return json_response(doc, 422 if report.errors else 200)


@route(ep.RUNS_MIGRATE, "move open runs of older versions to a newer one, each under its lock, audited with the "
       "token's name (as `runs migrate`)", body=dm.MigrateRequest, errors=(404, 409), tag="deploys")
async def api_runs_migrate(request: web.Request) -> web.Response:
    b = await read_model(request, dm.MigrateRequest)
    return json_response(await automation_for(request).migrate_runs(
        params(request)["workflow"], b.to, from_versions=b.from_versions, filter=b.filter, rate=b.rate,
        dry_run=b.dry_run, allow_reexecute=b.allow_reexecute, by=_token(request), why=b.reason))


@route(ep.VERSIONS, "a workflow's versions with their open runs, oldest open run and drained since (as "
       "`versions`)", errors=(404,), tag="deploys")
async def api_versions(request: web.Request) -> web.Response:
    return json_response(await automation_for(request).versions(params(request)["workflow"]))


@route(ep.VERSION_RETIRE, "retire a version: refused while it has open runs (E_VERSION_HAS_OPEN_RUNS) unless "
       "migrate_to moves them first (as `versions retire`)", body=dm.RetireRequest, errors=(404, 409),
       tag="deploys")
async def api_version_retire(request: web.Request) -> web.Response:
    b = await read_model(request, dm.RetireRequest)
    p = params(request)
    return json_response(await automation_for(request).retire_version(
        p["workflow"], p["version"], migrate_to=b.migrate_to, by=_token(request), why=b.reason))
