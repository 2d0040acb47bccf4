"""Signed webhooks (§9): verify, then persist the envelope and create the run in one transaction.

Order of the checks (every one before anything is written; each refusal counts in
`webhook_rejected_total{reason}`): the HTTP layer answers 405 (method), 404 (unknown project/trigger), 415
(content type), 413 (body over 1 MB, while streaming) and 400 (duplicated A44-* headers); then `accept_webhook`:
401 missing/malformed timestamp or signature, 408 `E_TIMESTAMP_SKEW` (more than 300 s either way), 401 bad
signature (constant-time compare against every valid secret), 400 body not UTF-8 JSON or bad idempotency key.
Accepted: 202 `{"run_id"}` for a new run, 200 with the original run id for a key seen within 24 h.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...app.views import iso
from ...errors import A44Error
from ..results import encode_json
from .ids import new_event_id
from .metrics import COUNTERS
from .runs import create_run_in, workflow_partition_key

MAX_BODY = 1024 * 1024
MAX_SKEW_S = 300
MAX_KEY_LEN = 256
E_TIMESTAMP_SKEW = "E_TIMESTAMP_SKEW"
E_SIGNATURE_INVALID = "E_SIGNATURE_INVALID"
E_ENVELOPE_INVALID = "E_ENVELOPE_INVALID"


class Rejection(Exception):
    """A refused request: HTTP status, error code, `reason` label of webhook_rejected_total, message."""

    def __init__(self, status: int, code: str, reason: str, message: str):
        super().__init__(message)
        self.status, self.code, self.reason, self.message = status, code, reason, message

    def to_dict(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}


def reject(status: int, code: str, reason: str, message: str) -> Rejection:
    COUNTERS.inc("webhook_rejected_total", reason=reason)
    return Rejection(status, code, reason, message)


def sign(secret: str, timestamp: str | int, body: bytes) -> str:
    """hex HMAC-SHA256 of `timestamp + "." + raw_body`, keyed by the secret string's UTF-8 bytes."""
    mac = hmac.new(secret.encode("utf-8"), str(timestamp).encode("ascii") + b"." + body, hashlib.sha256)
    return mac.hexdigest()


def derived_key(body: bytes) -> str:
    """The idempotency key when A44-Idempotency-Key is absent: the body's hash (same body = same run)."""
    return "body:sha256:" + hashlib.sha256(body).hexdigest()


def _bad_float(text: str):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _bad_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def parse_json(body: bytes) -> Any:
    """Strict JSON: UTF-8, finite numbers, no NUL or lone surrogates in strings (PostgreSQL jsonb refuses them)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"the body is not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text, parse_float=_bad_float, parse_constant=_bad_constant)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None
    _check_strings(value)
    return value


def _check_strings(value: Any) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            _check_text(v)
        elif isinstance(v, dict):
            for k, item in v.items():
                _check_text(k)
                stack.append(item)
        elif isinstance(v, list):
            stack.extend(v)


def _check_text(s: str) -> None:
    if "\x00" in s:
        raise ValueError("strings may not contain \\u0000")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("strings may not contain lone surrogates") from None


@dataclass(frozen=True)
class WebhookResult:
    status: int              # 202 created, 200 deduplicated
    run_id: str
    created: bool
    key_age_seconds: float
    event_id: str | None
    idempotency_key: str

    def to_dict(self) -> dict:
        return {"run_id": self.run_id}


def check_signature(secrets: list[str], timestamp: str | None, signature: str | None, body: bytes,
                    now: datetime) -> None:
    if not timestamp:
        raise reject(401, E_SIGNATURE_INVALID, "missing_timestamp", "A44-Timestamp is missing")
    if not signature:
        raise reject(401, E_SIGNATURE_INVALID, "missing_signature", "A44-Signature is missing")
    ts = timestamp.strip()
    if not (ts.isascii() and ts.isdigit()) or len(ts) > 12:
        raise reject(401, E_SIGNATURE_INVALID, "bad_timestamp", "A44-Timestamp must be Unix seconds")
    if abs(int(ts) - now.timestamp()) > MAX_SKEW_S:
        raise reject(408, E_TIMESTAMP_SKEW, "timestamp_skew",
                     f"A44-Timestamp is more than {MAX_SKEW_S} s from the server clock")
    given = signature.strip().lower().encode("ascii", "replace")
    ok = False
    for secret in secrets:
        expected = sign(secret, ts, body).encode("ascii")
        ok |= hmac.compare_digest(expected, given)   # no early exit: time does not depend on which one matched
    if not ok:
        raise reject(401, E_SIGNATURE_INVALID, "bad_signature", "A44-Signature does not match the body")


async def lookup(store, project: str, trigger_id: str, now: datetime):
    """The webhook trigger row (with valid secrets and latest workflow version), or None."""
    return await store.fetchrow("webhook_lookup", project, trigger_id, now)


async def accept_webhook(store, project: str, trigger, *, timestamp: str | None, signature: str | None,
                         idempotency_key: str | None, body: bytes) -> WebhookResult:
    """Verify and ingest one request whose trigger row (`lookup`) is known. Raises Rejection."""
    now = store.clock.now()
    check_signature(list(trigger["secrets"] or []), timestamp, signature, body, now)
    try:
        data = parse_json(body)
    except ValueError as exc:
        raise reject(400, E_ENVELOPE_INVALID, "invalid_json", f"the body is not valid JSON: {exc}") from None
    if idempotency_key is not None:
        key = idempotency_key.strip()
        if not key or len(key) > MAX_KEY_LEN or not key.isprintable():
            raise reject(400, E_ENVELOPE_INVALID, "bad_idempotency_key",
                         f"A44-Idempotency-Key must be 1..{MAX_KEY_LEN} printable characters")
    else:
        key = derived_key(body)
    trigger_id = trigger["trigger_id"]
    tctx = {"id": trigger_id, "type": "webhook"}
    try:
        partition_key = workflow_partition_key(trigger["workflow_ir"], data, tctx)
    except A44Error as exc:
        raise reject(422, exc.code, "partition_key", exc.message) from None
    if trigger["version"] is None:
        raise reject(404, "E_WORKFLOW_NOT_FOUND", "no_workflow",
                     f"the workflow {trigger['workflow_id']} of {trigger_id} is not published")
    event_id = new_event_id(now)
    envelope = encode_json({"id": event_id, "type": f"webhook.{trigger_id}", "idempotency_key": key,
                            "partition_key": partition_key, "occurred_at": iso(now), "attempt": 1, "data": data,
                            "trigger_id": trigger_id})
    workflow_ir = trigger["workflow_ir"] or {}
    async with store.transaction("webhook_ingest") as conn:
        from ..queries import sql

        made = await create_run_in(conn, project, trigger["workflow_id"], trigger["version"], data,
                                   f"{trigger_id}:{key}", trigger_id=trigger_id, event_id=event_id,
                                   partition_key=partition_key, queue=workflow_ir.get("queue"), now=now)
        if made.created:
            await conn.execute(sql("event_insert"), event_id, project, f"webhook.{trigger_id}", key, partition_key,
                               trigger_id, "webhook", now, now, envelope)
    COUNTERS.inc("webhook_accepted_total", outcome="created" if made.created else "deduplicated")
    return WebhookResult(202 if made.created else 200, made.run_id, made.created, made.key_age_seconds,
                         event_id if made.created else None, key)
