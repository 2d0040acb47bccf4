"""The app services the CLI's operating verbs call (Queues, replay, resolve, Alerts, Notifications, tokens,
webhook secrets, metrics, connectors), over a daemon's REST API: the same methods and return values as the local
ones, so `--remote` prints what the local path prints. `twin(auto, "queues")` hands one out."""

from __future__ import annotations

import builtins

from .contract import endpoints as ep
from .contract.services import AdminService, AlertsService, FlowService, NotificationsService, QueuesService
from .remote import RemoteAutomation, timestamps


def _rows(doc: dict, key: str) -> list[dict]:
    return [timestamps(r) for r in doc[key]]


class RemoteQueues(QueuesService):
    """`app.queues.Queues` over `/v1/automation/queues` and `/dead-letters`."""

    def __init__(self, auto: RemoteAutomation):
        self.auto, self.project = auto, auto.project

    async def stats(self) -> list[dict]:
        _, doc = await self.auto._call(ep.QUEUES.call())
        return doc["queues"]

    async def dlq_list(self, queue: str | None = None, *, limit: int = 50) -> list[dict]:
        _, doc = await self.auto._call(ep.DEAD_LETTERS.call(), params={"queue": queue, "limit": limit})
        return _rows(doc, "dead_letters")

    async def dlq_stats(self, queue: str, since=None) -> dict:
        _, doc = await self.auto._call(ep.DLQ_STATS.at(queue=queue), params={"since": since})
        return doc

    async def dlq_show(self, dead_letter_id: str, *, with_attempts: bool = False) -> dict:
        _, doc = await self.auto._call(ep.DEAD_LETTER.at(dead_letter_id=dead_letter_id),
                                       params={"with_attempts": "true" if with_attempts else None})
        return timestamps(doc)

    async def dlq_redrive(self, queue: str, *, filter: str | None = None, rate=None, max: int | None = None,
                          dry_run: bool = False, progress=None):
        from ..runtime.queues import RedriveReport

        body = {"filter": filter, "rate": None if rate is None else str(rate), "max": max, "dry_run": dry_run}
        _, doc = await self.auto._call(ep.DLQ_REDRIVE.at(queue=queue), body=body)
        return RedriveReport(doc["queue"], doc["dry_run"], doc["matched"], doc["redriven"],
                             doc["dead_lettered_again"], doc["skipped_taken"], doc["scanned"], doc["elapsed_s"],
                             doc["runs"])


class RemoteFlow(FlowService):
    """`app.flow.Flow` over `/v1/automation/flow/...`; the daemon records the calling token's name as who."""

    def __init__(self, auto: RemoteAutomation):
        self.auto = auto

    async def list(self) -> builtins.list[dict]:
        _, doc = await self.auto._call(ep.FLOW_KEYS.call())
        return _rows(doc, "keys")

    async def pause(self, key: str, *, until, by: str, reason: str | None = None) -> dict:
        until = until.isoformat() if hasattr(until, "isoformat") else until
        _, doc = await self.auto._call(ep.FLOW_PAUSE.call(), body={"key": key, "until": until, "reason": reason})
        return timestamps(doc)

    async def resume(self, key: str, *, by: str) -> dict:
        _, doc = await self.auto._call(ep.FLOW_RESUME.call(), body={"key": key})
        return timestamps(doc)

    async def buffers(self, workflow: str | None = None) -> builtins.list[dict]:
        _, doc = await self.auto._call(ep.FLOW_BUFFERS.call(), params={"workflow": workflow})
        return _rows(doc, "buffers")


class RemoteAlerts(AlertsService):
    """`app.alerts.Alerts` over `/v1/automation/alert-rules`, `/builtin-alerts` and `/alerts`."""

    def __init__(self, auto: RemoteAutomation):
        self.auto = auto

    async def create(self, name: str, *, metric: str, condition: str, filter: str = "", severity: str = "p3",
                     notify: str | None = None, escalate_to: str | None = None, suppress_window: str | None = None,
                     update_every: int | None = None) -> dict:
        _, doc = await self.auto._call(ep.ALERT_RULE_PUT.at(name=name), body={
            "metric": metric, "condition": condition, "filter": filter or "", "severity": severity,
            "notify": notify, "escalate_to": escalate_to, "suppress_window": suppress_window,
            "update_every": update_every})
        return timestamps(doc)

    async def builtin(self, *, notify: str | None, escalate_to: str | None = None, severity: str = "p2",
                      suppress_window: str | None = None, update_every: int | None = None) -> dict:
        _, doc = await self.auto._call(ep.BUILTIN_ALERTS.call(), body={
            "notify": notify, "escalate_to": escalate_to, "severity": severity, "suppress_window": suppress_window,
            "update_every": update_every})
        return timestamps(doc)

    async def list(self) -> builtins.list[dict]:
        _, doc = await self.auto._call(ep.ALERT_RULES.call())
        return _rows(doc, "rules")

    async def show(self, name: str) -> dict:
        _, doc = await self.auto._call(ep.ALERT_RULE.at(name=name))
        return timestamps(doc)

    async def rm(self, name: str) -> None:
        await self.auto._call(ep.ALERT_RULE_RM.at(name=name))

    async def test(self, name: str) -> dict:
        _, doc = await self.auto._call(ep.ALERT_RULE_TEST.at(name=name))
        return doc

    async def alerts(self, *, state: str | None = None, limit: int = 50) -> builtins.list[dict]:
        _, doc = await self.auto._call(ep.ALERTS.call(), params={"state": state, "limit": limit})
        return _rows(doc, "alerts")


class RemoteNotifications(NotificationsService):
    """`app.notifications.Notifications` over `/v1/automation/channels` and `/notifications`; secrets a channel
    names are checked on the daemon's host, where they are read."""

    def __init__(self, auto: RemoteAutomation):
        self.auto = auto

    async def create_channel(self, name: str, kind: str, config: dict) -> dict:
        _, doc = await self.auto._call(ep.CHANNEL_PUT.at(name=name), body={"type": kind, "config": config})
        return timestamps(doc)

    async def channels(self) -> list[dict]:
        _, doc = await self.auto._call(ep.CHANNELS.call())
        return _rows(doc, "channels")

    async def channel(self, name: str) -> dict:
        _, doc = await self.auto._call(ep.CHANNEL.at(name=name))
        return timestamps(doc)

    async def remove_channel(self, name: str) -> None:
        await self.auto._call(ep.CHANNEL_RM.at(name=name))

    async def test_channel(self, name: str, *, timeout: float = 30.0) -> dict:
        _, doc = await self.auto._call(ep.CHANNEL_TEST.at(name=name), params={"timeout": f"{timeout}s"})
        return timestamps(doc)

    async def notifications(self, *, state: str | None = None, limit: int = 100) -> list[dict]:
        _, doc = await self.auto._call(ep.NOTIFICATIONS.call(), params={"state": state, "limit": limit})
        return _rows(doc, "notifications")

    async def notification(self, notification_id: int) -> dict:
        _, doc = await self.auto._call(ep.NOTIFICATION.at(notification_id=int(notification_id)))
        return timestamps(doc)

    async def retry(self, notification_id: int) -> bool:
        _, doc = await self.auto._call(ep.NOTIFICATION_RETRY.at(notification_id=int(notification_id)))
        return bool(doc["requeued"])


class RemoteAdmin(AdminService):
    """Tokens, webhook secrets, metrics, connectors and replay of the daemon's project."""

    def __init__(self, auto: RemoteAutomation):
        self.auto = auto

    async def replay(self, run_ids=(), **options) -> dict:
        options.pop("progress", None)   # the daemon hands the runs over; nothing to show here
        if options.get("from_time") is not None:
            options["from_time"] = str(options["from_time"])
        _, doc = await self.auto._call(ep.REPLAY.call(), body={"run_ids": list(run_ids), **options})
        return doc

    async def tokens(self) -> list[dict]:
        _, doc = await self.auto._call(ep.TOKENS.call())
        return _rows(doc, "tokens")

    async def create_token(self, name: str, scopes: list[str], expires: str | None, allow_cidrs: list[str]) -> dict:
        _, doc = await self.auto._call(ep.TOKEN_CREATE.call(), body={
            "name": name, "scopes": list(scopes), "expires": expires or "never", "allow_cidrs": list(allow_cidrs)})
        return timestamps(doc)

    async def revoke_token(self, token_id: str) -> None:
        await self.auto._call(ep.TOKEN_REVOKE.at(token_id=token_id))

    async def webhook_secret(self, trigger: str) -> str:
        _, doc = await self.auto._call(ep.WEBHOOK_SECRET.at(trigger=trigger))
        return doc["secret"]

    async def rotate_webhook_secret(self, trigger: str) -> dict:
        _, doc = await self.auto._call(ep.WEBHOOK_ROTATE.at(trigger=trigger))
        return timestamps(doc)

    async def metrics(self, prefix: str | None = None) -> list[dict]:
        _, doc = await self.auto._call(ep.METRICS.call(), params={"name": prefix})
        return doc["metrics"]

    async def connectors(self) -> list[dict]:
        _, doc = await self.auto._call(ep.CONNECTORS.call())
        return doc["connectors"]


def twin(auto: RemoteAutomation, name: str):
    """The remote twin of an app service: queues, flow, alerts, notifications, admin."""
    return {"queues": RemoteQueues, "flow": RemoteFlow, "alerts": RemoteAlerts, "notifications": RemoteNotifications,
            "admin": RemoteAdmin}[name](auto)
