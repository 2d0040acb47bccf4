"""Flow limits of a workflow (§22, docs/flow.md): per-key concurrency, throttle, rateLimit,
fairness (and `priority`, a CEL string or an integer 1..9 on the workflow).

The shapes only; the bounds (`limit` > 0, `per` within 1s..7d, a known `scope`) are lint rules
(rules/flow_limits.py), so each is a stable diagnostic at its YAML position instead of a schema error. A `key` is
CEL over the run's `input`.
"""

from __future__ import annotations

from pydantic import StrictInt, StrictStr

from .base import Model
from .types import Bool, RunSpan


class KeyLimit(Model):
    """At most `limit` runs holding a slot of one value of `key` at once."""

    key: StrictStr
    """CEL over `input`, e.g. `input.tenantId`; a failure or null sends the run to the DLQ (E_FLOW_KEY_INVALID)."""
    limit: StrictInt
    """Slots per key value (> 0)."""
    scope: StrictStr = "workflow"
    """`workflow` (this workflow's runs only) or `project` (shared by every workflow naming the same key value)."""
    holdWhileWaiting: Bool = False
    """Keep the slot while the run sleeps, waits, awaits an approval or a child (default: freed when it parks)."""


class Throttle(Model):
    """At most `limit` runs of one key value start per `per`, `burst` at once; the rest wait, none is dropped."""

    key: StrictStr
    """CEL over `input`."""
    limit: StrictInt
    """Starts per `per` (> 0)."""
    per: RunSpan
    """The window (1s..7d)."""
    burst: StrictInt | None = None
    """Starts allowed at once after a quiet time (default 1)."""


class RateLimit(Model):
    """At most `limit` runs of one key value per `per`; the rest are skipped (recorded, with why)."""

    key: StrictStr
    """CEL over `input`."""
    limit: StrictInt
    """Runs per `per` (> 0)."""
    per: RunSpan
    """The window (1s..7d)."""


class Fairness(Model):
    """Waiting runs are admitted in weighted fair shares between the values of `key`."""

    key: StrictStr
    """CEL over `input`, e.g. `input.tenantId`."""
    weight: StrictStr | None = None
    """CEL over `input` giving a number > 0 and at most 1000 (default 1): a key of weight 4 gets 4 shares."""
