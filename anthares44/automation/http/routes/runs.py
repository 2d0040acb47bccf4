"""Runs over REST: publish, start, list, read, logs (JSON or server-sent events), partitions, skip, log queries.
Each handler is the CLI verb's `Automation` call."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ...app.contract import endpoints as ep
from ...app.contract.models import runs as rm
from ...errors import E_INVALID_ARGUMENT, A44Error
from ..context import (
    PRINCIPAL_KEY,
    automation_for,
    incoming_parent,
    json_object,
    json_response,
    principal,
    read_json,
    read_model,
    uploaded,
)
from ..event_stream import stream_events
from ..params import params
from ..routing import route

MAX_SAMPLE = 10_000         # histories in one answer of GET /histories


def _token(request: web.Request) -> str:
    """Who a person's action over REST is recorded as: the calling token's name."""
    principal: Any = request[PRINCIPAL_KEY]
    return f"token:{principal.name}"


@route(ep.PUBLISH, "compile and publish workflow and trigger files (as `publish`)",
       body=rm.PublishRequest, errors=(408, 413))
async def api_publish(request: web.Request) -> web.Response:
    """Body: {"files": {"relative/path.yaml": "<yaml text>", ...}}; answer: the PublishReport (as publish --format
    json)."""
    doc = json_object(await read_json(request))
    files = doc.get("files")
    if not isinstance(files, dict) or not files or not all(isinstance(k, str) and isinstance(v, str)
                                                           for k, v in files.items()):
        raise A44Error(E_INVALID_ARGUMENT, "`files` must map relative paths to YAML texts")
    auto = automation_for(request)
    with uploaded(files) as (root, rel):
        report = await auto.publish([str(root)])
        doc = report.to_dict()
    doc["files"] = [rel(f) for f in doc["files"]]
    for item in doc["diagnostics"] + doc["workflows"]:
        item["file"] = rel(item.get("file"))
    return json_response(doc, 200 if report.ok else 422)


@route(ep.RUN_START, "start a run (idempotency key mandatory); 202 created, 200 deduplicated",
       body=rm.RunRequest, headers=("A44-Idempotency-Key",),
       errors=(404, 408, 413))
async def api_run(request: web.Request) -> web.Response:
    doc = json_object(await read_json(request))
    key = doc.get("idempotency_key") or request.headers.get("A44-Idempotency-Key")
    workflow = doc.get("workflow")
    if not isinstance(workflow, str):
        raise A44Error(E_INVALID_ARGUMENT, "`workflow` (string) is required")
    if key is not None and not isinstance(key, str):
        raise A44Error(E_INVALID_ARGUMENT, "`idempotency_key` must be a string")
    handle = await automation_for(request).run(workflow, doc.get("input"), key, parent=incoming_parent(request),
                                               initiator=principal(request).name)
    return json_response(handle.to_dict(), 202 if handle.created else 200)


@route(ep.RUNS, "list runs (as `runs --format json`)", query=("state", "workflow", "step", "since", "limit", "offset"))
async def api_runs(request: web.Request) -> web.Response:
    q = params(request)
    page = await automation_for(request).runs(state=q.get("state"), workflow=q.get("workflow"), step=q.get("step"),
                                              since=q.get("since"), limit=min(q.get("limit", 50), 1000),
                                              offset=q.get("offset", 0))
    return json_response(page.to_dict())


@route(ep.RUN, "one run", errors=(404,))
async def api_run_get(request: web.Request) -> web.Response:
    return json_response(await automation_for(request).get_run(params(request)["run_id"]))


@route(ep.RUN_LOGS, "attempts of a run; with ?follow=true or Accept: "
       "text/event-stream, server-sent events until the run ends (resume with Last-Event-ID)",
       query=("follow", "after"), headers=("Last-Event-ID",), errors=(404,))
async def api_logs(request: web.Request) -> web.StreamResponse:
    auto, q = automation_for(request), params(request)
    run_id = q["run_id"]
    if not (q.get("follow") or "text/event-stream" in request.headers.get("Accept", "")):
        run = await auto.get_run(run_id)
        return json_response({"run": run, "attempts": await auto.logs(run_id)})
    after = q.get("Last-Event-ID", q.get("after", 0))   # both checked before the stream starts
    await auto.get_run(run_id)  # 404 before the stream starts
    return await stream_events(request, auto.follow(run_id, after))


@route(ep.PARTITIONS, "partitions of a run (run_...) or of a workflow's runs, "
       "newest run first (as `partitions --format json`); a run's are paged: `cursor` is the `next` of the page "
       "before", query=("state", "partition", "step", "limit", "cursor"), errors=(400, 404))
async def api_partitions(request: web.Request) -> web.Response:
    q = params(request)
    return json_response(await automation_for(request).partitions(
        q["target"], state=q.get("state"), partition=q.get("partition"), step=q.get("step"),
        limit=min(q.get("limit", 1000), 10_000), cursor=q.get("cursor")))


@route(ep.SKIP, "skip a failed partition (or step) of a partial or failed "
       "run, recording the token's name and the reason (as `runs skip`)", body=rm.SkipRequest,
       errors=(404, 409))
async def api_skip(request: web.Request) -> web.Response:
    """A person (the calling token's name is recorded as who) skips a failed partition or step."""
    b = await read_model(request, rm.SkipRequest)
    return json_response(await automation_for(request).skip(params(request)["run_id"], partition=b.partition,
                                                            step=b.step, reason=b.reason,
                                                            by=_token(request)))


@route(ep.CANCEL, "cancel a run, recording the token's name and the reason: at "
       "once when no worker holds it, else at the holder's next safe point (as `runs cancel`)",
       body=rm.CancelRequest, errors=(404, 409))
async def api_cancel(request: web.Request) -> web.Response:
    b = await read_model(request, rm.CancelRequest)
    return json_response(await automation_for(request).cancel(
        params(request)["run_id"], by=_token(request), reason=b.reason,
        compensate=b.compensate))


@route(ep.SIGNAL, "send a signal to a run (as `signal`): consumed by its open wait of that name or buffered for "
       "the next one, in order; a repeated idempotency key answers the first signal", body=rm.SignalRequest,
       errors=(400, 404, 409, 413))
async def api_signal(request: web.Request) -> web.Response:
    b = await read_model(request, rm.SignalRequest)
    p = params(request)
    return json_response(await automation_for(request).signal(
        p["run_id"], p["name"], b.data, key=b.idempotency_key, by=f"token:{principal(request).name}"), 202)


@route(ep.RUN_TREE, "the tree of child workflows the run belongs to, from its root: each run with its state, "
       "parent, the parent's step and depth (as `runs tree`)", errors=(404,))
async def api_run_tree(request: web.Request) -> web.Response:
    return json_response(await automation_for(request).run_tree(params(request)["run_id"]))


@route(ep.WAKE, "end a sleeping step's timer now, recording the token's name and the reason (as `runs wake`)",
       body=rm.WakeRequest, errors=(404, 409))
async def api_wake(request: web.Request) -> web.Response:
    b = await read_model(request, rm.WakeRequest)
    return json_response(await automation_for(request).wake(
        params(request)["run_id"], b.step, by=_token(request), reason=b.reason))


@route(ep.RESCHEDULE, "move a sleeping step's due instant, recording the token's name (as `runs reschedule`); "
       "past the run's deadline: 422 E_SLEEP_EXCEEDS_RUN_DEADLINE", body=rm.RescheduleRequest,
       errors=(404, 409, 422))
async def api_reschedule(request: web.Request) -> web.Response:
    b = await read_model(request, rm.RescheduleRequest)
    return json_response(await automation_for(request).reschedule(
        params(request)["run_id"], b.step, until=b.until, by=_token(request),
        reason=b.reason))


@route(ep.HISTORIES, "finished runs of a workflow created within `since` (default 14d), a random sample of at most "
       "`sample` (default 500, at most 10,000), as histories redacted like results (as `runs export`)",
       query=("workflow", "since", "sample"))
async def api_histories(request: web.Request) -> web.Response:
    from datetime import timedelta

    q = params(request)
    if "workflow" not in q:
        raise A44Error(E_INVALID_ARGUMENT, "query parameter workflow is required (a workflow id or name)")
    since = q.get("since", timedelta(days=14))
    return json_response({"histories": await automation_for(request).export(
        q["workflow"], since=since, sample=min(q.get("sample", 500), MAX_SAMPLE))})


@route(ep.RUN_EXPLAIN, "what holds a run back (as `runs explain`): each limit with its key, use, since when, the "
       "oldest holder, the queue position, a throttle's next token, a pause and its reason", errors=(404,))
async def api_explain(request: web.Request) -> web.Response:
    return json_response(await automation_for(request).explain(params(request)["run_id"]))


@route(ep.LOGS, "attempts of every run of the project, newest first, filtered (as "
       "`logs query --format json`); a truncated answer has `next`, passed back as `cursor`",
       query=("error_code", "step", "workflow", "partition_key", "since", "until",
                                          "limit", "cursor", "archive"), errors=(501,), tag="logs")
async def api_logs_query(request: web.Request) -> web.Response:
    q = params(request)
    page = await automation_for(request).query_logs(
        error_code=q.get("error_code"), step=q.get("step"), workflow=q.get("workflow"),
        partition_key=q.get("partition_key"), since=q.get("since"), until=q.get("until"),
        limit=q.get("limit", 100), after=q.get("cursor"), archive=q.get("archive", False))
    return json_response(page.to_dict())
