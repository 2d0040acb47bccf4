"""Alert rules, alerts, notification channels and notifications."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .common import Age, Body, Doc, Id, Text


class Routing(Body):
    severity: Literal["p1", "p2", "p3", "p4", "p5"] = "p3"
    notify: Id | None = Field(None, description="the channel that gets it (none: logged)")
    escalate_to: Id | None = None
    suppress_window: Age | None = None
    update_every: int | None = Field(None, ge=1, le=2 ** 31 - 1)


class AlertRuleRequest(Routing):
    metric: Text
    condition: Text = Field(description="e.g. > 10 for 5m")
    filter: Text = ""


class BuiltinRequest(Routing):
    severity: Literal["p1", "p2", "p3", "p4", "p5"] = "p2"


class AlertRule(Doc):
    name: str
    metric: str
    condition: str
    severity: str


class AlertRuleChange(AlertRule):
    outcome: str


class AlertRules(Doc):
    rules: list[dict]


class AlertTest(Doc):
    rule: str
    firing: bool
    series: list[dict]


class AlertList(Doc):
    alerts: list[dict]


class ChannelRequest(Body):
    type: Literal["webhook", "slack", "email"]
    config: dict[str, Any] = Field(description="webhook: url, secretRef; slack: url; email: from, to, smtp")


class Channel(Doc):
    name: str
    kind: str
    config: dict


class Channels(Doc):
    channels: list[dict]


class Notification(Doc):
    id: int
    state: str


class Notifications(Doc):
    notifications: list[dict]


class Requeued(Doc):
    id: int
    requeued: bool
