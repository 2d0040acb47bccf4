"""Human approval (§20, docs/approvals.md): `kind: approvers` files declare who may decide (a group: a name and
its members, each the name of an API token or `local:<os user>`), and a step's `approval:` block says which groups
decide, how many must approve, how long the request stays open, when to remind and to whom it escalates."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictStr

from .base import Model
from .types import Bool, PositiveInt, RunSpan

GROUP_NAME_PATTERN = r"^[a-z][a-z0-9_.-]{0,62}$"
# a person: an API token's name (`alice`, `ana@example.com`) or a local CLI user (`local:ana`)
PERSON_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@:+-]{0,199}$"
MAX_MEMBERS = 500
MAX_REMINDERS = 10

GroupName = StrictStr
Person = StrictStr


class ApproverGroup(Model):
    """A group of approvers: the people an approval step may name by the group's `name`."""

    kind: Literal["approvers"]
    """`approvers` (required: a group is recognised by its kind)."""
    name: GroupName = Field(pattern=GROUP_NAME_PATTERN)
    """The group's name, as a step's `approval.approvers.groups` names it, e.g. `finance-leads`."""
    description: StrictStr | None = None
    """Free text."""
    members: list[Person] = Field(min_length=1, max_length=MAX_MEMBERS)
    """The people: API token names (`alice`) or local CLI users (`local:alice`)."""


class Approvers(Model):
    """Who decides: the members of `groups`; `min` distinct members must approve."""

    groups: list[GroupName] = Field(min_length=1, max_length=20)
    """Approver groups (`kind: approvers` names)."""
    min: PositiveInt = 1
    """How many distinct members must approve (default 1); one reject ends the request rejected."""


class EscalateTo(Model):
    """Who else may decide once the request escalates."""

    groups: list[GroupName] = Field(min_length=1, max_length=20)
    """Approver groups added to the deciders (and notified)."""


class Escalate(Model):
    """After `after` with no outcome, the members of `to.groups` may decide too and are notified."""

    after: RunSpan
    """How long after the request opens; before its `timeout`."""
    to: EscalateTo
    """The groups it escalates to."""


class Approval(Model):
    """A person's decision (§20, docs/approvals.md); the run holds no worker meanwhile."""

    approvers: Approvers
    """Who decides and how many must approve."""
    timeout: RunSpan
    """Required: how long the request stays open, e.g. `72h`; it must fit in the run's `maxDuration`."""
    remind: list[RunSpan] | None = Field(None, max_length=MAX_REMINDERS)
    """When to remind the deciders that have not decided, after the request opens, e.g. `[24h, 48h]`."""
    escalate: Escalate | None = None
    """Whom else to ask, and when."""
    onTimeout: Literal["reject", "fail", "continue"] = "reject"
    """When the timeout comes first: `reject` (the step fails with E_APPROVAL_REJECTED), `fail` (E_WAIT_TIMEOUT)
    or `continue` with output `{"kind": "approval", "decision": "timeout"}`."""
    notify: StrictStr | None = None
    """The notification channel (`a44 monitor channel`) the request, its reminders and escalation go to."""
    allowSelf: Bool = False
    """Whether the run's initiator may approve it (default no: E_SELF_APPROVAL)."""
