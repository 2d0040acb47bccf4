"""Alert rule and notification channel files (§16, docs/alerts.md): `kind: alert` says what to watch and where
to send it, `kind: channel` where a message goes. The rule's metric, filter and condition are checked by the
same code as `a44 monitor alert create` (grammar/alert_rules.py, in rules/monitoring.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictStr

from .base import Model
from .types import Bool, Duration, ObjectId, PositiveInt

SecretRef = StrictStr


class AlertRule(Model):
    """An alert rule: a metric, a label filter, a condition; its severity, channels and suppression."""

    kind: Literal["alert"]
    """`alert` (required: a rule is recognised by its kind)."""
    name: StrictStr
    """The rule's name, as `a44 monitor alert create --name`: lower-case letters, digits, `.`, `_`, `-`."""
    description: StrictStr | None = None
    """Free text."""
    metric: StrictStr
    """The metric watched, e.g. `automation.dlq_depth` (docs/alerts.md lists them)."""
    filter: StrictStr = ""
    """Label matchers, comma-separated: `queue="q_invoice_settle", workflow!="wf_x"`."""
    condition: StrictStr
    """`min_over_time(10m) > 0`, `rate(5m) >= 0.5`, `increase(1h) > 10`, or `> 100` (the last value)."""
    severity: Literal["p1", "p2", "p3", "p4"] = "p3"
    """p1 (most urgent) to p4."""
    notify: StrictStr | None = None
    """The channel its messages go to (a `kind: channel` id)."""
    escalateTo: StrictStr | None = None
    """Where it escalates at p1 when the suppression window ends still firing (default: `notify`)."""
    suppressWindow: Duration | None = None
    """The suppression window (default 10m)."""
    updateEvery: PositiveInt | None = None
    """One update message every N occurrences within the window (default 10)."""


class _Channel(Model):
    kind: Literal["channel"]
    """`channel` (required: a channel is recognised by its kind)."""
    id: ObjectId
    """The channel's name, as `--notify` names it, e.g. `squad-billing`."""
    description: StrictStr | None = None
    """Free text."""


class WebhookChannel(_Channel):
    """A generic webhook: each message POSTed as JSON, signed with HMAC like a44's own webhooks."""

    type: Literal["webhook"]
    """`webhook`."""
    url: StrictStr
    """Where messages are POSTed."""
    secretRef: SecretRef
    """The signing secret, by reference (never its value)."""


class SlackChannel(_Channel):
    """A Slack-compatible incoming webhook."""

    type: Literal["slack"]
    """`slack`."""
    url: StrictStr
    """The incoming webhook URL."""


class Smtp(Model):
    """The SMTP server that sends the mail."""

    host: StrictStr
    """Host name or address."""
    port: PositiveInt = 587
    """Port (default 587)."""
    starttls: Bool = True
    """Upgrade the connection with STARTTLS (default true)."""
    usernameSecretRef: SecretRef | None = None
    """The login's user name, by reference."""
    passwordSecretRef: SecretRef | None = None
    """The login's password, by reference."""


class EmailChannel(_Channel):
    """Email over SMTP."""

    type: Literal["email"]
    """`email`."""
    from_: StrictStr = Field(alias="from")
    """The sender address."""
    to: list[StrictStr] = Field(min_length=1)
    """The recipients."""
    smtp: Smtp
    """The server."""


CHANNEL_MODELS: dict[str, type[_Channel]] = {"webhook": WebhookChannel, "slack": SlackChannel,
                                             "email": EmailChannel}


def channel_config(model: _Channel) -> dict[str, Any]:
    """The `notification_channels.config` of a channel file (the shape the delivery worker reads)."""
    if isinstance(model, WebhookChannel):
        return {"url": model.url, "secretRef": model.secretRef}
    if isinstance(model, SlackChannel):
        return {"url": model.url}
    assert isinstance(model, EmailChannel)   # the three kinds of CHANNEL_MODELS
    smtp: dict[str, Any] = {"host": model.smtp.host, "port": model.smtp.port, "starttls": model.smtp.starttls}
    for key in ("usernameSecretRef", "passwordSecretRef"):
        if getattr(model.smtp, key) is not None:
            smtp[key] = getattr(model.smtp, key)
    return {"from": model.from_, "to": list(model.to), "smtp": smtp}
