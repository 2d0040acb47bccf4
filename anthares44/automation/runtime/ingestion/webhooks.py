"""Signed webhooks (§9): verify, then persist the envelope and create the run in one statement (`webhook_ingest`),
committed together with concurrent requests by the group committer (group_commit.py); the trigger and its secrets
come from a short-lived cache that cannot accept what the database would refuse (webhook_cache.py).

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

from ...errors import (
    E_DB,
    E_ENVELOPE_INVALID,
    E_FLOW_KEY_INVALID,
    E_SIGNATURE_INVALID,
    E_TIMESTAMP_SKEW,
    E_TRIGGER_NOT_FOUND,
    E_WORKFLOW_NOT_FOUND,
    A44Error,
    http_status,
)
from ...jsonenc import iso
from ...tracing import Parent
from ..store.core import IDEMPOTENCY_WINDOW, RUN_WALL_CLOCK_LIMIT
from ..store.results import encode_json
from ..ulid import new_run_id
from . import wait_index
from .group_commit import committer_for
from .ids import new_event_id
from .metrics import COUNTERS
from .runs import workflow_partition_key
from .trace_parent import record_parent
from .webhook_cache import WebhookTarget, cache_for, from_row

MAX_BODY = 1024 * 1024
MAX_SKEW_S = 300
MAX_KEY_LEN = 256


class Rejection(Exception):
    """A refused request: HTTP status, error code, `reason` label of webhook_rejected_total, message."""

    def __init__(self, status: int, code: str, reason: str, message: str):
        super().__init__(message)
        self.status, self.code, self.reason, self.message = status, code, reason, message

    def to_dict(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}


def reject(code: str, reason: str, message: str) -> Rejection:
    """The refusal of `code`, with its HTTP status from errors.py, counted under `reason`."""
    COUNTERS.inc("webhook_rejected_total", reason=reason)
    return Rejection(http_status(code), code, reason, message)


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
    status: int              # 202 created (or buffered), 200 deduplicated
    run_id: str | None       # None: buffered by the workflow's debounce / batch, its run not started yet
    created: bool
    key_age_seconds: float
    event_id: str | None
    idempotency_key: str
    buffer_id: str | None = None     # the debounce / batch buffer the request joined (runtime/buffers)

    def to_dict(self) -> dict:
        return {"run_id": self.run_id} if self.buffer_id is None else {"run_id": self.run_id,
                                                                        "buffer_id": self.buffer_id}


def check_timestamp(timestamp: str | None, signature: str | None, now: datetime) -> str:
    """The checks that need no secret (401 missing/malformed, 408 skew); returns the timestamp as signed."""
    if not timestamp:
        raise reject(E_SIGNATURE_INVALID, "missing_timestamp", "A44-Timestamp is missing")
    if not signature:
        raise reject(E_SIGNATURE_INVALID, "missing_signature", "A44-Signature is missing")
    ts = timestamp.strip()
    if not (ts.isascii() and ts.isdigit()) or len(ts) > 12:
        raise reject(E_SIGNATURE_INVALID, "bad_timestamp", "A44-Timestamp must be Unix seconds")
    if abs(int(ts) - now.timestamp()) > MAX_SKEW_S:
        raise reject(E_TIMESTAMP_SKEW, "timestamp_skew",
                     f"A44-Timestamp is more than {MAX_SKEW_S} s from the server clock")
    return ts


def signature_matches(secrets: list[str], ts: str, signature: str, body: bytes) -> str | None:
    """The secret that signed (None: none did)."""
    given = signature.strip().lower().encode("ascii", "replace")
    matched = None
    for secret in secrets:
        expected = sign(secret, ts, body).encode("ascii")
        if hmac.compare_digest(expected, given) and matched is None:  # every secret is tried: no early exit
            matched = secret
    return matched


def check_signature(secrets: list[str], timestamp: str | None, signature: str | None, body: bytes,
                    now: datetime) -> None:
    ts = check_timestamp(timestamp, signature, now)
    if not signature_matches(secrets, ts, signature, body):
        raise reject(E_SIGNATURE_INVALID, "bad_signature", "A44-Signature does not match the body")


async def lookup(store, project: str, trigger_id: str, now: datetime | None = None, *,
                 fresh: bool = False) -> WebhookTarget | None:
    """The webhook trigger (valid secrets, latest workflow version) or None; from the short-lived cache unless
    `fresh` (webhook_cache.py says why a cached entry cannot accept what the database would refuse)."""
    cache = cache_for(store)
    if not fresh:
        entry = cache.get(project, trigger_id)
        if entry is not None:
            return entry
    row = await store.fetchrow("webhook_target", project=project, trigger_id=trigger_id, now=now or store.clock.now())
    if row is None:
        cache.drop(project, trigger_id)
        return None
    entry = from_row(row)
    cache.put(project, entry)
    return entry


def _not_found(project: str, trigger_id: str) -> Rejection:
    return reject(E_TRIGGER_NOT_FOUND, "not_found", f"no webhook trigger {trigger_id} in {project}")


async def accept_webhook(store, project: str, trigger: WebhookTarget, *, timestamp: str | None,
                         signature: str | None, idempotency_key: str | None, body: bytes,
                         received_at: float | None = None, parent: Parent | None = None) -> WebhookResult:
    """Verify and ingest one request whose trigger (`lookup`) is known. Raises Rejection.

    Every check happens before the single write; the write (`webhook_ingest`, grouped with concurrent requests
    into one transaction by group_commit.py) has committed when this returns. `received_at` (time.monotonic() when
    the request arrived) spares a second read when `trigger` was read from the database during this request.
    `parent` (the request's `traceparent`) becomes the parent of the run's trace once the request is verified."""
    now = store.clock.now()
    trigger_id = trigger.trigger_id
    ts = check_timestamp(timestamp, signature, now)
    secret = signature_matches(trigger.valid_secrets(now), ts, signature, body)
    if secret is None:
        # a secret added since the cached read (rotation, first use) must work at once: read again, then decide
        fresh = await lookup(store, project, trigger.trigger_id, now, fresh=True) \
            if received_at is None or trigger.fetched_at < received_at else None
        secret = signature_matches(fresh.valid_secrets(now), ts, signature, body) if fresh is not None else None
        if secret is None:
            raise reject(E_SIGNATURE_INVALID, "bad_signature", "A44-Signature does not match the body")
        trigger = fresh
    try:
        data = parse_json(body)
    except ValueError as exc:
        raise reject(E_ENVELOPE_INVALID, "invalid_json", f"the body is not valid JSON: {exc}") from None
    if idempotency_key is not None:
        key = idempotency_key.strip()
        if not key or len(key) > MAX_KEY_LEN or not key.isprintable():
            raise reject(E_ENVELOPE_INVALID, "bad_idempotency_key",
                         f"A44-Idempotency-Key must be 1..{MAX_KEY_LEN} printable characters")
    else:
        key = derived_key(body)
    input_json = encode_json(data)
    await record_parent(store, project, [f"{trigger_id}:{key}"], parent, now)
    if (trigger.workflow_ir or {}).get("buffer"):
        return await _buffered(store, project, trigger, secret, data, key, now, ts, signature, body)
    for _ in range(5):
        row, event_id = await _write(store, project, trigger, secret, data, input_json, key, now)
        if row is not None:
            break
        # the cached trigger, secret or workflow version changed under us; nothing was written: start over from a
        # fresh read (which may now refuse the request)
        trigger = await lookup(store, project, trigger_id, now, fresh=True)
        if trigger is None:
            raise _not_found(project, trigger_id)
        secret = signature_matches(trigger.valid_secrets(now), ts, signature, body)
        if secret is None:
            raise reject(E_SIGNATURE_INVALID, "bad_signature", "A44-Signature does not match the body")
    else:  # pragma: no cover - republished five times during one request
        raise A44Error(E_DB, "the webhook trigger kept changing during the request; try again")
    if row["created_run_id"] is not None:
        COUNTERS.inc("webhook_accepted_total", outcome="created")
        return WebhookResult(202, row["created_run_id"], True, 0.0, event_id, key)
    run_key = f"{trigger.trigger_id}:{key}"
    if row["held_run_id"] is not None:
        run_id, held_at = row["held_run_id"], row["held_at"]
    else:  # claimed by a concurrent request that committed after this statement's snapshot
        held = await store.fetchrow("idempotency_key_get", project=project, key=run_key)
        if held is None:  # pragma: no cover - the holder vanished between two statements
            raise A44Error(E_DB, f"idempotency key {run_key!r} changed hands; try again")
        run_id, held_at = held["run_id"], held["created_at"]
    COUNTERS.inc("webhook_accepted_total", outcome="deduplicated")
    return WebhookResult(200, run_id, False, max(0.0, (now - held_at).total_seconds()), None, key)


async def _buffered(store, project: str, trigger: WebhookTarget, secret: str, data: Any, key: str, now: datetime,
                    ts: str, signature: str | None, body: bytes) -> WebhookResult:
    """A request for a debounced / batched workflow joins its key's buffer (runtime/buffers/webhook.py)."""
    from ..buffers import webhook as buffered

    for _ in range(5):
        try:
            pk = await workflow_partition_key(trigger.workflow_ir, data, {"id": trigger.trigger_id, "type": "webhook"})
            done = await buffered.accept(store, project, trigger, secret, data, key, pk, now)
        except A44Error as exc:
            raise reject(exc.code, "partition_key" if exc.code != E_FLOW_KEY_INVALID else "flow_key",
                         exc.message) from None
        if done is not None:
            status, run_id, buffer_id, age, event_id = done
            return WebhookResult(status, run_id, status == 202, age, event_id, key, buffer_id)
        cache_for(store).drop(project, trigger.trigger_id)
        fresh = await lookup(store, project, trigger.trigger_id, now, fresh=True)
        if fresh is None:
            raise _not_found(project, trigger.trigger_id)
        secret = signature_matches(fresh.valid_secrets(now), ts, signature or "", body) or ""
        if not secret:
            raise reject(E_SIGNATURE_INVALID, "bad_signature", "A44-Signature does not match the body")
        if not (fresh.workflow_ir or {}).get("buffer"):   # republished without debounce / batch: the plain path
            raise A44Error(E_DB, "the webhook's workflow changed during the request; try again")
        trigger = fresh
    raise A44Error(E_DB, "the webhook trigger kept changing during the request; try again")  # pragma: no cover


async def _write(store, project: str, trigger: WebhookTarget, secret: str, data: Any, input_json: str, key: str,
                 now: datetime):
    """(row, event_id): the `webhook_ingest` row, or None when the cached trigger is stale (nothing written)."""
    trigger_id = trigger.trigger_id
    tctx = {"id": trigger_id, "type": "webhook"}
    try:
        partition_key = await workflow_partition_key(trigger.workflow_ir, data, tctx)
    except A44Error as exc:
        raise reject(exc.code, "partition_key", exc.message) from None
    if trigger.version is None:
        raise reject(E_WORKFLOW_NOT_FOUND, "no_workflow",
                     f"the workflow {trigger.workflow_id} of {trigger_id} is not published")
    event_id = new_event_id(now)
    env = {"id": event_id, "type": f"webhook.{trigger_id}", "idempotency_key": key, "partition_key": partition_key,
           "occurred_at": iso(now), "attempt": 1, "data": data, "trigger_id": trigger_id}
    envelope = encode_json(env)
    hashes, values = await wait_index.values(store, project, env["type"], env)   # for the runs waiting for it
    workflow_ir = trigger.workflow_ir or {}
    args = dict(project=project, workflow_id=trigger.workflow_id, version=trigger.version, run_id=new_run_id(now),
                input=input_json, key=f"{trigger_id}:{key}", trigger_id=trigger_id, partition_key=partition_key,
                queue=workflow_ir.get("queue"), now=now, window=IDEMPOTENCY_WINDOW,
                deadline=now + RUN_WALL_CLOCK_LIMIT, event_id=event_id, event_type=f"webhook.{trigger_id}",
                event_key=key, trigger_stamp=trigger.updated_at, envelope=envelope, secret=secret,
                corr_hashes=hashes, corr_values=values)
    row = await committer_for(store).submit(args)
    if not row["trigger_current"] or row["latest_version"] != trigger.version:
        cache_for(store).drop(project, trigger_id)
        return None, None
    return row, event_id
