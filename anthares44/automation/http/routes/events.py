"""The event bus over REST: publish (202 created, 200 deduplicated), list, show."""

from __future__ import annotations

from aiohttp import web

from ...app.contract import endpoints as ep
from ...app.contract.models import events as ev
from ...app.ingestion import Ingestion
from ...errors import A44Error, http_status
from ..context import LIMITS_KEY, MAX_API_BODY, automation_for, incoming_parent, json_response
from ..limits import read_body
from ..params import params
from ..routing import route


def ingestion_for(request: web.Request) -> Ingestion:
    return Ingestion(automation_for(request))


@route(ep.EVENT_PUBLISH, "publish an event on the bus; 202 created, 200 deduplicated (24 h); a body "
       "that cannot be deserialized is kept byte for byte as a dead letter (400 E_ENVELOPE_INVALID with its id)",
       body=ev.EventRequest, headers=("A44-Idempotency-Key",), errors=(408, 409, 413), tag="events")
async def api_events_publish(request: web.Request) -> web.Response:
    # the body is read raw, not through the model: what cannot be deserialized must reach the DLQ as received
    raw = await read_body(request, MAX_API_BODY, request.app[LIMITS_KEY].body_timeout)
    try:
        result = await ingestion_for(request).publish_raw(raw, header_key=request.headers.get("A44-Idempotency-Key"),
                                                          parent=incoming_parent(request))
    except A44Error as exc:
        if "dead_letter_id" not in exc.details:
            raise
        return json_response({"error": {**exc.to_dict(), "dead_letter_id": exc.details["dead_letter_id"]}},
                             http_status(exc.code))
    return json_response(result.to_dict(), result.status)


@route(ep.EVENTS, "list events", query=("type", "limit", "offset"), tag="events")
async def api_events_list(request: web.Request) -> web.Response:
    q = params(request)
    events = await ingestion_for(request).events(q.get("type"), min(q.get("limit", 50), 1000), q.get("offset", 0))
    return json_response({"events": events})


@route(ep.EVENT, "one event: envelope and deliveries", errors=(404,), tag="events")
async def api_event_get(request: web.Request) -> web.Response:
    return json_response(await ingestion_for(request).event(params(request)["event_id"]))
