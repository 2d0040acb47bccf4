"""The use cases only the HTTP plane has: deliver a signed webhook, authenticate an API token, count and render
the ingestion metrics. The edge (`http/`) parses requests and formats answers; what they mean is decided here and
below, so `http/` imports `app` and nothing of the runtime.

Events, runs and publishing go through `Automation` and `Ingestion` like the CLI's verbs.
"""

from __future__ import annotations

from typing import Any

from ..runtime.ingestion import group_commit, tokens, webhook_cache, webhooks
from ..runtime.ingestion.metrics import COUNTERS
from ..tracing import Parent

# The refusals the edge turns into answers: each carries its status, its code and (webhooks) the reason label
# of webhook_rejected_total
Rejection = webhooks.Rejection
AuthError = tokens.AuthError
Principal = tokens.Principal
WebhookResult = webhooks.WebhookResult
WebhookTarget = webhooks.WebhookTarget
MAX_WEBHOOK_BODY = webhooks.MAX_BODY


def tune_webhooks(store, *, max_batch: int | None = None, flushers: int | None = None,
                  cache_ttl: float | None = None) -> None:
    """The webhook path's group commit and trigger cache for this store (None: the defaults, docs/webhooks.md)."""
    group_commit.tune(store, max_batch=max_batch, flushers=flushers)
    webhook_cache.tune(store, cache_ttl)


def refuse_webhook(code: str, reason: str, message: str) -> Rejection:
    """A webhook refusal (its status from errors.py), counted under `reason` before it is raised."""
    return webhooks.reject(code, reason, message)


async def find_webhook(store, project: str, trigger_id: str) -> WebhookTarget | None:
    """The active webhook trigger, from the short-lived cache (webhook_cache.py) or the database."""
    return await webhooks.lookup(store, project, trigger_id, store.clock.now())


async def accept_webhook(store, project: str, trigger: WebhookTarget, *, timestamp: str | None,
                         signature: str | None, idempotency_key: str | None, body: bytes,
                         received_at: float | None = None, parent: Parent | None = None) -> WebhookResult:
    """Verify and ingest one delivery (signature, timestamp, JSON, key) in one write; raises Rejection. `parent`
    (the request's `traceparent`) is the parent of the run's trace."""
    return await webhooks.accept_webhook(store, project, trigger, timestamp=timestamp, signature=signature,
                                         idempotency_key=idempotency_key, body=body, received_at=received_at,
                                         parent=parent)


def parse_json(raw: bytes) -> Any:
    """A request body as JSON with the webhook endpoint's rules (no NaN, no lone surrogates); ValueError."""
    return webhooks.parse_json(raw)


async def authenticate(store, authorization: str | None, remote: str | None, scope: str) -> Principal:
    """The principal of `Authorization: Bearer ...` when it holds `scope` from `remote`; raises AuthError."""
    return await tokens.check_token(store, authorization, remote, scope)


def count(name: str, **labels: str) -> None:
    """One more of a counter of `GET /metrics`."""
    COUNTERS.inc(name, **labels)
