"""Trigger files (§8.3, §11): event, webhook, schedule and manual triggers, and the workflow's inline form."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import StrictStr

from .base import Model
from .types import Bool, Cron, Duration, ObjectId, PositiveInt, TimeZone

DST_POLICIES = ("skip-nonexistent", "run-once", "run-twice")
OVERLAP = ("skip", "queue", "allow")


class Deliver(Model):
    """Delivery rules of an event trigger."""

    maxAge: Duration | None = None
    """Events older than this go to the DLQ with `E_EVENT_TOO_OLD`."""
    dropOnFilterMiss: Bool = True
    """Drop events that miss the filter (only a counter moves) instead of keeping them."""


class CatchUp(Model):
    """Recovery of occurrences missed while no scheduler ran."""

    enabled: Bool = False
    """Run missed occurrences."""
    maxOccurrences: PositiveInt = 1
    """At most this many missed occurrences."""
    maxAge: Duration | None = None
    """Only occurrences no older than this."""


class _TriggerBase(Model):
    id: ObjectId
    """Stable trigger id, e.g. `trg_refund_large`."""
    workflow: StrictStr
    """Workflow id (`wf_...`) started by this trigger."""
    description: StrictStr | None = None
    """Free text."""
    kind: Literal["trigger"] | None = None
    """Optional; the file kind is recognised by shape."""


class EventTrigger(_TriggerBase):
    """Starts a run for each bus event of a type that passes the filter."""

    type: Literal["event"]
    """Bus subscription."""
    event: StrictStr
    """Event type, e.g. `billing.refund.requested`."""
    filter: StrictStr | None = None
    """CEL over `data` (and the envelope fields), evaluated at ingestion."""
    deliver: Deliver | None = None
    """maxAge and dropOnFilterMiss."""
    partitionKey: StrictStr | None = None
    """Template over `data` overriding the envelope's partition key."""


class WebhookTrigger(_TriggerBase):
    """Starts a run for each signed POST to `/v1/{project}/{trigger}`."""

    type: Literal["webhook"]
    """Signed HTTP endpoint."""


class ScheduleTrigger(_TriggerBase):
    """Starts a run at each occurrence of a cron expression in a time zone."""

    type: Literal["schedule"]
    """Cron schedule."""
    cron: Cron
    """Five-field cron, e.g. `15 3 * * *`."""
    tz: TimeZone
    """Mandatory IANA time zone: the cron is read in local calendar time."""
    dstPolicy: Literal["skip-nonexistent", "run-once", "run-twice"] = "skip-nonexistent"
    """What nonexistent (spring-forward) and ambiguous (fall-back) local times do."""
    overlap: Literal["skip", "queue", "allow"] = "skip"
    """What an occurrence does while the previous run still runs."""
    catchUp: CatchUp | None = None
    """Missed-occurrence recovery."""
    input: dict[str, Any] | None = None
    """Static input of each run."""


class ManualTrigger(_TriggerBase):
    """Runs started by `a44 automation run` or the API."""

    type: Literal["manual"]
    """CLI or API runs."""


TRIGGER_MODELS: dict[str, type[Model]] = {
    "event": EventTrigger, "webhook": WebhookTrigger, "schedule": ScheduleTrigger, "manual": ManualTrigger,
}


class InlineTrigger(Model):
    """The workflow's own trigger shorthand: `{event: T}`, `{cron: ..., tz: ...}`, `{webhook: true}`,
    `{manual: true}`; its id becomes `trg_<workflow>_<n>`."""

    event: StrictStr | None = None
    """Event type to subscribe to."""
    filter: StrictStr | None = None
    """CEL filter over `data`."""
    deliver: Deliver | None = None
    """Event delivery rules."""
    cron: Cron | None = None
    """Five-field cron (with `tz`)."""
    tz: TimeZone | None = None
    """IANA time zone, mandatory with `cron`."""
    dstPolicy: Literal["skip-nonexistent", "run-once", "run-twice"] | None = None
    """DST policy of the schedule."""
    overlap: Literal["skip", "queue", "allow"] | None = None
    """Overlap policy of the schedule."""
    catchUp: CatchUp | None = None
    """Missed-occurrence recovery of the schedule."""
    webhook: Bool | None = None
    """A webhook endpoint for this workflow."""
    manual: Bool | None = None
    """Manual runs (always allowed; kept for explicitness)."""
    id: ObjectId | None = None
    """Optional explicit trigger id."""
