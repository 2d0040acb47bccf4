"""Queue files (§10.1): flow control between ingestion and execution, and the dead-letter policy."""

from __future__ import annotations

from typing import Literal

from pydantic import StrictStr

from .base import Model
from .types import Bool, Duration, ObjectId, PositiveInt

DEFAULT_QUEUE = "q_default"
DEFAULT_QUEUE_CONCURRENCY = 100


class DeadLetter(Model):
    """What happens to messages that cannot be processed. Nothing leaves the DLQ by itself."""

    enabled: Bool = True
    """Keep dead messages (with envelope, attempts and last error) for inspection and redrive."""
    maxAge: Duration | None = None
    """Messages waiting longer than this go to the DLQ with `E_EVENT_TOO_OLD`."""


class Queue(Model):
    """A queue: concurrency cap, ordering and redelivery budget."""

    id: ObjectId
    """Queue id, e.g. `q_invoice_settle`."""
    kind: Literal["queue"] | None = None
    """Optional; the file kind is recognised by shape."""
    description: StrictStr | None = None
    """Free text."""
    maxConcurrency: PositiveInt = DEFAULT_QUEUE_CONCURRENCY
    """Runs of this queue in flight at once."""
    ordering: Literal["none", "by-partition"] = "none"
    """`by-partition`: runs with the same partition key never overlap and start in ingestion order."""
    maxAttempts: PositiveInt = 3
    """Deliveries of one message before it goes to the DLQ (distinct from step retries)."""
    deadLetter: DeadLetter | None = None
    """Dead-letter policy."""
