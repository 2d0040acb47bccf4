"""Operating runs and queues over REST: replay (dry run included), resolve an exclusive step, queue gauges, the
dead-letter queue (list, stats, show, redrive with a CEL filter), paused flow keys (list, pause, resume), open debounce / batch buffers. Each handler is the CLI verb's app/ call."""

from __future__ import annotations

from aiohttp import web

from ...app.contract import endpoints as ep
from ...app.contract.models import flow as fm
from ...app.contract.models import queues as qm
from ...app.contract.models import runs as rm
from ...app.flow import Flow
from ...app.queues import Queues
from ...app.replay import replay
from ..context import automation_for, json_response, principal, read_model
from ..params import params
from ..routing import route


@route(ep.REPLAY, "re-run terminal runs from a step, an instant or their failed partitions, "
       "reusing earlier results (as `replay`); dry_run: the plan, nothing changes", body=rm.ReplayRequest,
       errors=(404, 409, 413))
async def api_replay(request: web.Request) -> web.Response:
    b = await read_model(request, rm.ReplayRequest)
    doc = await replay(automation_for(request), b.run_ids, state=b.state, step=b.step, since=b.since,
                       workflow=b.workflow, from_step=b.from_step, from_time=b.from_time,
                       failed_partitions=b.failed_partitions, to_version=b.to_version, dry_run=b.dry_run,
                       rate=b.rate, concurrency=b.concurrency, request_id=b.request_id)
    return json_response(doc)


@route(ep.RESOLVE, "settle an exclusive step awaiting confirmation (as `runs "
       "resolve`), recording the token's name; answers the run", body=rm.ResolveRequest, errors=(404, 409))
async def api_resolve(request: web.Request) -> web.Response:
    b = await read_model(request, rm.ResolveRequest)
    run = await automation_for(request).resolve(params(request)["run_id"], b.step, b.outcome,
                                                by=f"token:{principal(request).name}")
    return json_response(run)


@route(ep.QUEUES, "per queue: limits, in flight, waiting, oldest waiting age, DLQ depth "
       "(as `queues stats`)", tag="queues")
async def api_queues(request: web.Request) -> web.Response:
    return json_response({"queues": await Queues(automation_for(request)).stats()})


@route(ep.DEAD_LETTERS, "dead letters newest first, of every queue or of `queue` (as `dlq "
       "list`)", query=("queue", "limit"), tag="queues")
async def api_dlq_list(request: web.Request) -> web.Response:
    q = params(request)
    rows = await Queues(automation_for(request)).dlq_list(q.get("queue"), limit=min(q.get("limit", 50), 1000))
    return json_response({"dead_letters": rows})


@route(ep.DEAD_LETTER, "one dead letter: envelope, last error, with_attempts: "
       "every delivery and its attempts (as `dlq show`)", query=("with_attempts",),
       errors=(404,), tag="queues")
async def api_dlq_show(request: web.Request) -> web.Response:
    q = params(request)
    return json_response(await Queues(automation_for(request)).dlq_show(
        q["dead_letter_id"], with_attempts=q.get("with_attempts", False)))


@route(ep.DLQ_STATS, "a queue's dead letters by error code (as `dlq "
       "stats`)", query=("since",), errors=(404,), tag="queues")
async def api_dlq_stats(request: web.Request) -> web.Response:
    q = params(request)
    return json_response(await Queues(automation_for(request)).dlq_stats(q["queue"], since=q.get("since")))


@route(ep.DLQ_REDRIVE, "re-enqueue a queue's dead letters matching a "
       "CEL filter, at most `rate` per second and `max` in all, never one twice (as `dlq redrive`); dry_run: count "
       "and list", body=qm.RedriveRequest, errors=(404,), tag="queues")
async def api_dlq_redrive(request: web.Request) -> web.Response:
    b = await read_model(request, qm.RedriveRequest)
    report = await Queues(automation_for(request)).dlq_redrive(params(request)["queue"], filter=b.filter,
                                                              rate=b.rate, max=b.max, dry_run=b.dry_run)
    return json_response(report.to_dict())


@route(ep.FLOW_KEYS, "the flow keys paused now, the soonest to end first (as `flow list`)", tag="flow")
async def api_flow_keys(request: web.Request) -> web.Response:
    return json_response({"keys": await Flow(automation_for(request)).list()})


@route(ep.FLOW_BUFFERS, "the open debounce / batch buffers, oldest first (as `flow buffers`)", tag="flow",
       query=("workflow",))
async def api_flow_buffers(request: web.Request) -> web.Response:
    return json_response({"buffers": await Flow(automation_for(request)).buffers(params(request).get("workflow"))})


@route(ep.FLOW_PAUSE, "pause a flow key until an instant, recording the token's name and the reason (as `flow "
       "pause`); runs released until a later end go at `until`", body=fm.FlowPauseRequest, tag="flow")
async def api_flow_pause(request: web.Request) -> web.Response:
    b = await read_model(request, fm.FlowPauseRequest)
    return json_response(await Flow(automation_for(request)).pause(b.key, until=b.until, reason=b.reason,
                                                                   by=f"token:{principal(request).name}"))


@route(ep.FLOW_RESUME, "end a flow key's pause now, recording the token's name (as `flow resume`); the runs "
       "waiting on it are due at once", body=fm.FlowResumeRequest, errors=(404,), tag="flow")
async def api_flow_resume(request: web.Request) -> web.Response:
    b = await read_model(request, fm.FlowResumeRequest)
    return json_response(await Flow(automation_for(request)).resume(b.key, by=f"token:{principal(request).name}"))
