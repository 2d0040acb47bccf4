"""The ingestion plane (SPEC §7.1, §8, §9): published triggers, signed webhooks and the event bus turn what comes
from outside into persisted event envelopes and runs. `http/` (the edge) serves it over HTTP; the CLI and the Python
API (`app/ingestion.py`) call the same functions."""

from .bus import EventResult, publish_event
from .metrics import COUNTERS, Counters
from .triggers import store_triggers
from .webhooks import Rejection, WebhookResult, accept_webhook, sign

__all__ = ["COUNTERS", "Counters", "EventResult", "Rejection", "WebhookResult", "accept_webhook", "publish_event",
           "sign", "store_triggers"]
