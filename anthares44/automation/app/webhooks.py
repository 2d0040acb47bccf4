"""Test traffic for a project's signed webhooks (`a44 automation webhook sign|send|list`, docs/webhooks.md): the
current secret used without showing it, the signature headers the ingestion checks, and the webhook triggers with
the path each is posted to. Showing and rotating a secret are administration (app/admin.py)."""

from __future__ import annotations

from ..runtime.ingestion.triggers import current_secret, list_triggers
from ..runtime.ingestion.webhooks import sign


async def signing_secret(store, project: str, trigger: str) -> str:
    """The trigger's newest valid secret (made on first use), not marked as shown."""
    return (await current_secret(store, project, trigger))["secret"]


def signed_headers(secret: str, body: bytes, ts: int, key: str | None) -> dict:
    """The headers of a POST of `body` at Unix second `ts` that the webhook endpoint accepts."""
    h = {"Content-Type": "application/json", "A44-Timestamp": str(ts), "A44-Signature": sign(secret, ts, body)}
    if key is not None:
        h["A44-Idempotency-Key"] = key
    return h


def webhook_path(project: str, trigger: str) -> str:
    return f"/v1/{project}/{trigger}"


async def webhook_triggers(store, project: str) -> list[dict]:
    """{trigger_id, workflow_id, path} of each webhook trigger of the project."""
    return [{"trigger_id": r["trigger_id"], "workflow_id": r["workflow_id"],
             "path": webhook_path(project, r["trigger_id"])} for r in await list_triggers(store, project, "webhook")]
