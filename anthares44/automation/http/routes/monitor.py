"""Monitoring over REST: alert rules (create or replace, list, show, remove, test, the built-in alerts' routing),
alerts with their history, notification channels and notifications. Each handler is the `a44 monitor` verb's
call (app/alerts.py, app/notifications.py)."""

from __future__ import annotations

from aiohttp import web

from ...app.alerts import Alerts, sampling_interval
from ...app.contract import endpoints as ep
from ...app.contract.models import monitor as mm
from ...app.notifications import Notifications
from ..context import automation_for, json_response, read_model, settings_for
from ..params import params
from ..routing import READ, route


def _alerts(request: web.Request) -> Alerts:
    # a test reads the samples at the interval this daemon takes them (A44_ALERT_INTERVAL), as the CLI does
    return Alerts(automation_for(request), interval_s=sampling_interval(settings_for(request).alert_interval))


def _notifications(request: web.Request) -> Notifications:
    return Notifications(automation_for(request), settings_for(request))


@route(ep.ALERT_RULES, "the project's alert rules (as `monitor alert list`)", tag="monitor")
async def api_rules(request: web.Request) -> web.Response:
    return json_response({"rules": await _alerts(request).list()})


@route(ep.ALERT_RULE_PUT, "create or replace an alert rule (as `monitor alert create`)",
       body=mm.AlertRuleRequest, tag="monitor")
async def api_rule_put(request: web.Request) -> web.Response:
    b = await read_model(request, mm.AlertRuleRequest)
    return json_response(await _alerts(request).create(
        params(request)["name"], metric=b.metric, condition=b.condition, filter=b.filter, severity=b.severity,
        notify=b.notify, escalate_to=b.escalate_to, suppress_window=b.suppress_window, update_every=b.update_every))


@route(ep.ALERT_RULE, "one alert rule (as `monitor alert show`)", errors=(404,), tag="monitor")
async def api_rule_get(request: web.Request) -> web.Response:
    return json_response(await _alerts(request).show(params(request)["name"]))


@route(ep.ALERT_RULE_RM, "remove an alert rule (as `monitor alert rm`)", errors=(404,), tag="monitor")
async def api_rule_rm(request: web.Request) -> web.Response:
    name = params(request)["name"]
    await _alerts(request).rm(name)
    return json_response({"removed": name})


@route(ep.ALERT_RULE_TEST, "the rule's verdict per series now; nothing is recorded "
       "or sent (as `monitor alert test`)", scope=READ, errors=(404,), tag="monitor")
async def api_rule_test(request: web.Request) -> web.Response:
    return json_response(await _alerts(request).test(params(request)["name"]))


@route(ep.BUILTIN_ALERTS, "where the built-in alerts (failed runs, DLQ growth...) go (as "
       "`monitor alert builtin`)", body=mm.BuiltinRequest, tag="monitor")
async def api_builtin(request: web.Request) -> web.Response:
    b = await read_model(request, mm.BuiltinRequest)
    return json_response(await _alerts(request).builtin(notify=b.notify, escalate_to=b.escalate_to,
                                                        severity=b.severity, suppress_window=b.suppress_window,
                                                        update_every=b.update_every))


@route(ep.ALERTS, "alerts firing first, then newest, with their history (as `monitor "
       "alerts`)", query=("state", "limit"), tag="monitor")
async def api_alerts(request: web.Request) -> web.Response:
    q = params(request)
    return json_response({"alerts": await _alerts(request).alerts(state=q.get("state"),
                                                                  limit=min(q.get("limit", 50), 1000))})


@route(ep.CHANNELS, "the project's notification channels (as `monitor channel list`)", tag="monitor")
async def api_channels(request: web.Request) -> web.Response:
    return json_response({"channels": await _notifications(request).channels()})


@route(ep.CHANNEL_PUT, "declare a channel; its secrets must be defined on the daemon's "
       "host (as `monitor channel create`)", body=mm.ChannelRequest, errors=(404, 409),
       tag="monitor")
async def api_channel_put(request: web.Request) -> web.Response:
    b = await read_model(request, mm.ChannelRequest)
    return json_response(await _notifications(request).create_channel(params(request)["name"], b.type, b.config))


@route(ep.CHANNEL, "one channel (as `monitor channel show`)", errors=(404,), tag="monitor")
async def api_channel_get(request: web.Request) -> web.Response:
    return json_response(await _notifications(request).channel(params(request)["name"]))


@route(ep.CHANNEL_RM, "remove a channel (as `monitor channel rm`)", errors=(404,), tag="monitor")
async def api_channel_rm(request: web.Request) -> web.Response:
    name = params(request)["name"]
    await _notifications(request).remove_channel(name)
    return json_response({"removed": name})


@route(ep.CHANNEL_TEST, "send a test message now and answer what happened (as "
       "`monitor channel test`)", query=("timeout",), errors=(404,), tag="monitor")
async def api_channel_test(request: web.Request) -> web.Response:
    q = params(request)
    timeout = min(q["timeout"].total_seconds(), 60.0) if "timeout" in q else 30.0
    return json_response(await _notifications(request).test_channel(q["name"], timeout=timeout))


@route(ep.NOTIFICATIONS, "notifications newest first: sent, waiting, failed (as `monitor "
       "notifications`)", query=("state", "limit"), tag="monitor")
async def api_notifications(request: web.Request) -> web.Response:
    q = params(request)
    return json_response({"notifications": await _notifications(request).notifications(
        state=q.get("state"), limit=min(q.get("limit", 100), 1000))})


@route(ep.NOTIFICATION, "one notification with its payload (as `monitor "
       "notifications show`)", errors=(404,), tag="monitor")
async def api_notification(request: web.Request) -> web.Response:
    return json_response(await _notifications(request).notification(params(request)["notification_id"]))


@route(ep.NOTIFICATION_RETRY, "send a failed notification again with a "
       "fresh attempt budget (as `monitor notifications retry`)", errors=(404,),
       tag="monitor")
async def api_notification_retry(request: web.Request) -> web.Response:
    nid = params(request)["notification_id"]
    return json_response({"id": nid, "requeued": await _notifications(request).retry(nid)})
