"""The event bus over REST: publish (202 created, 200 deduplicated), list, show."""

from __future__ import annotations

from aiohttp import web

from ...app.ingestion import Ingestion
from ..context import automation_for, incoming_parent, json_object, json_response, read_json
from ..models import events as ev
from ..params import params
from ..routing import route


def ingestion_for(request: web.Request) -> Ingestion:
    return Ingestion(automation_for(request))


@route("POST", "/v1/automation/events", "publish an event on the bus; 202 created, 200 deduplicated (24 h)",
       body=ev.EventRequest, answers={202: ev.EventResult, 200: ev.EventResult},
       headers=("A44-Idempotency-Key",), errors=(408, 413), tag="events")
async def api_events_publish(request: web.Request) -> web.Response:
    doc = json_object(await read_json(request))
    key = doc.get("idempotency_key", request.headers.get("A44-Idempotency-Key"))
    result = await ingestion_for(request).publish_event(doc.get("type"), doc.get("data"), key,
                                                        partition_key=doc.get("partition_key"),
                                                        occurred_at=doc.get("occurred_at"),
                                                        parent=incoming_parent(request))
    return json_response(result.to_dict(), result.status)


@route("GET", "/v1/automation/events", "list events", answers={200: ev.EventList},
       query=("type", "limit", "offset"), tag="events")
async def api_events_list(request: web.Request) -> web.Response:
    q = params(request)
    events = await ingestion_for(request).events(q.get("type"), min(q.get("limit", 50), 1000), q.get("offset", 0))
    return json_response({"events": events})


@route("GET", "/v1/automation/events/{event_id}", "one event: envelope and deliveries",
       answers={200: ev.Event}, errors=(404,), tag="events")
async def api_event_get(request: web.Request) -> web.Response:
    return json_response(await ingestion_for(request).event(params(request)["event_id"]))
