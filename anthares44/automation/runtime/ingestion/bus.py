"""The event bus (§8): `publish_event` persists an envelope and delivers it to every subscribed event trigger, all
in one transaction, so an accepted event (HTTP 202/200) has reached every subscriber durably: at-least-once
delivery, at-most-once effect.

Per subscribed trigger (active `event` triggers whose `event` equals the type), in this order:
1. `deliver.maxAge`: an event older than it (by `occurred_at`) goes to `dead_letters` with `E_EVENT_TOO_OLD`;
2. `filter` (CEL over `data` and the envelope fields), evaluated before any run exists, off the event loop within
   1 s: a miss (false, an evaluation error, or no answer in time) increments `event_filter_miss_total{trigger}`; with `dropOnFilterMiss: false` the miss is
   also recorded as a `filtered` delivery;
3. a run of the workflow's latest version, input = the event `data`, `trigger_id` and `event_id` recorded, with
   the idempotency key `{trigger_id}:{event idempotency key}`: one event delivered twice is one run per trigger;
   a workflow with `debounce` or `batch` gets no run here: the event joins its key's buffer (runtime/buffers,
   delivery `buffered`, its run_id filled in when the buffer flushes) or, its key not computable, the DLQ.

The event is also indexed, in the same transaction, for the runs whose event waits correlate on it
(wait_index.py): a waiting run is woken, a wait that opens later finds it.

The event key itself is deduplicated per project for 24 h (§8.2): a repeat returns the original event and its
deliveries and writes nothing. A client may give the envelope's `id`: it is kept, and the same id again is the
same event (answered as a repeat) when the envelope is the same, refused with `E_EVENT_ID_CONFLICT` when not.

`publish_raw` takes the HTTP entry's body as received: an envelope that cannot be deserialized is kept byte for
byte as a dead letter of the project's default queue (§10.3) and refused with `E_ENVELOPE_INVALID` naming it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from ...compiler.ir import DEFAULT_QUEUE
from ...errors import (
    E_ENVELOPE_INVALID,
    E_EVENT_ID_CONFLICT,
    E_EVENT_NOT_FOUND,
    E_EVENT_TOO_OLD,
    E_IDEMPOTENCY_KEY_REQUIRED,
    A44Error,
)
from ...jsonenc import iso
from ...tracing import Parent
from .. import evaluation
from ..store.core import IDEMPOTENCY_WINDOW
from ..store.results import encode_json
from . import wait_index
from .dead_letters import dead_letter
from .ids import new_event_id
from .metrics import COUNTERS
from .runs import create_run_in, render_key, workflow_partition_key
from .trace_parent import record_parent
from .webhooks import _check_strings, parse_json

MAX_KEY_LEN = 256
MAX_TYPE_LEN = 200
EVENT_ID = re.compile(r"evt_[0-9A-Za-z_-]{1,120}")


@dataclass
class EventResult:
    event_id: str
    created: bool                       # False: the key was seen within 24 h (nothing written)
    key_age_seconds: float
    type: str
    idempotency_key: str
    deliveries: list[dict] = field(default_factory=list)   # {trigger_id, outcome, run_id}

    @property
    def status(self) -> int:
        return 202 if self.created else 200

    def to_dict(self) -> dict:
        return {"event_id": self.event_id, "created": self.created, "key_age_seconds": round(self.key_age_seconds, 3),
                "type": self.type, "idempotency_key": self.idempotency_key, "deliveries": self.deliveries}


@lru_cache(maxsize=1024)
def _program(text: str, tree: str):
    from ...grammar import load_program

    return load_program(json.loads(tree))


async def filter_matches(trigger_ir: dict, envelope: dict) -> bool:
    """The trigger's filter over the envelope, off the event loop and bounded in time (a slow one is a miss)."""
    flt = trigger_ir.get("filter")
    if not flt:
        return True
    prog_ir = flt.get("program") or {"cel": flt.get("cel")}
    try:
        program = _program(flt.get("cel") or "", json.dumps(prog_ir, sort_keys=True))
        return await evaluation.evaluate(program, dict(envelope), evaluation.INGESTION_TIMEOUT_S) is True
    except Exception:  # noqa: BLE001 - an event the filter cannot read is a miss, never a crash
        return False


def _invalid(message: str) -> A44Error:
    return A44Error(E_ENVELOPE_INVALID, message)


def validate(type: Any, data: Any, idempotency_key: Any, partition_key: Any, occurred_at: Any) -> datetime | None:
    if not isinstance(type, str) or not type.strip() or len(type) > MAX_TYPE_LEN or not type.isprintable():
        raise _invalid(f"`type` must be a non-empty string of at most {MAX_TYPE_LEN} printable characters")
    if idempotency_key is None or (isinstance(idempotency_key, str) and not idempotency_key.strip()):
        raise A44Error(E_IDEMPOTENCY_KEY_REQUIRED, "an event needs an idempotency key",
                       hint="derive it from the data, e.g. invoice:inv_8812:finalized:v1")
    if not isinstance(idempotency_key, str) or len(idempotency_key) > MAX_KEY_LEN or not idempotency_key.isprintable():
        raise _invalid(f"`idempotency_key` must be a string of 1..{MAX_KEY_LEN} printable characters")
    if partition_key is not None and (not isinstance(partition_key, str) or len(partition_key) > MAX_KEY_LEN):
        raise _invalid("`partition_key` must be a string")
    try:
        _check_strings(data)
        encode_json(data)
    except (ValueError, A44Error) as exc:
        raise _invalid(f"`data` is not storable JSON: {getattr(exc, 'message', exc)}") from None
    if occurred_at is None:
        return None
    if not isinstance(occurred_at, str):
        raise _invalid("`occurred_at` must be an ISO 8601 string")
    try:
        when = datetime.fromisoformat(occurred_at.replace("Z", "+00:00"))
    except ValueError:
        raise _invalid(f"`occurred_at` {occurred_at[:40]!r} is not ISO 8601") from None
    if when.tzinfo is None:
        raise _invalid("`occurred_at` needs a UTC offset (e.g. 2026-07-19T14:02:11.884Z)")
    return when.astimezone(UTC)


async def publish_raw(store, project: str, body: bytes, *, header_key: str | None = None,
                      parent: Parent | None = None) -> EventResult:
    """Publish the envelope `body` (JSON bytes as received; `header_key` stands in for a missing
    `idempotency_key`). One that cannot be deserialized becomes a dead letter holding `body` exactly, and
    A44Error(E_ENVELOPE_INVALID) with `details["dead_letter_id"]` is raised."""
    try:
        doc = parse_json(body)
    except ValueError as exc:
        raise await _dead_letter_body(store, project, body, _invalid(f"the envelope is not JSON: {exc}")) from None
    if not isinstance(doc, dict):
        raise await _dead_letter_body(store, project, body, _invalid("the envelope must be a JSON object"))
    try:
        return await publish_event(store, project, doc.get("type"), doc.get("data"),
                                   doc.get("idempotency_key", header_key), partition_key=doc.get("partition_key"),
                                   occurred_at=doc.get("occurred_at"), parent=parent, event_id=doc.get("id"))
    except A44Error as err:
        if err.code != E_ENVELOPE_INVALID:  # raised by validation only, before anything is written
            raise
        raise await _dead_letter_body(store, project, body, err) from None


async def _dead_letter_body(store, project: str, body: bytes, err: A44Error) -> A44Error:
    now = store.clock.now()
    async with store.transaction("event_dead_letter") as conn:
        dl_id = await dead_letter(conn, project, DEFAULT_QUEUE, None, None, body, err, now)
    return A44Error(E_ENVELOPE_INVALID, f"{err.message}; kept as dead letter {dl_id}",
                    hint=f"`a44 automation dlq show {dl_id}` shows it as received",
                    details={"dead_letter_id": dl_id})


async def publish_event(store, project: str, type: str, data: Any, idempotency_key: str, *,
                        partition_key: str | None = None, occurred_at: str | datetime | None = None,
                        parent: Parent | None = None, event_id: str | None = None) -> EventResult:
    """Publish one event: every subscriber gets its run (or its dead letter / filter record) in one transaction.
    `parent` (the request's `traceparent`) is the parent of the traces of the runs it creates; `event_id` is
    the client's envelope id (else a new `evt_<ULID>`)."""
    if isinstance(occurred_at, datetime):
        occurred_at = iso(occurred_at)
    if event_id is not None and (not isinstance(event_id, str) or not EVENT_ID.fullmatch(event_id)):
        raise _invalid("`id` must be `evt_` followed by 1..120 letters, digits, `_` or `-`")
    when = validate(type, data, idempotency_key, partition_key, occurred_at)
    now = store.clock.now()
    given_when, when = when, when or now
    given_id, event_id = event_id, event_id or new_event_id(now)
    env = {"id": event_id, "type": type, "idempotency_key": idempotency_key, "partition_key": partition_key,
           "occurred_at": iso(when), "attempt": 1, "data": data}
    envelope = encode_json(env)
    subscribers = await store.fetch("triggers_for_event", project=project, type=type)
    hashes, values = await wait_index.values(store, project, type, env)   # what waiting runs correlate it on
    await record_parent(store, project, [f"{sub['trigger_id']}:{idempotency_key}" for sub in subscribers], parent, now)
    async with store.transaction("event_publish") as conn:
        if given_id is not None:
            await conn.fetchval("event_id_lock", event_id=given_id)  # a concurrent twin waits, then sees this one
            held = await conn.fetchrow("event_by_id", event_id=given_id)
            if held is not None:
                same = _same_envelope(held, project, type, data, idempotency_key, partition_key, given_when)
                if not same:
                    raise A44Error(E_EVENT_ID_CONFLICT, f"event {given_id} was already published with another "
                                                        "envelope", hint="give a new event a new id; repeat an "
                                                                         "event with exactly the same envelope")
                deliveries = [dict(r) for r in await conn.fetch("event_deliveries_list", event_id=given_id)]
                COUNTERS.inc("events_published_total", outcome="deduplicated")
                return EventResult(given_id, False, max(0.0, (now - held["received_at"]).total_seconds()),
                                   type, idempotency_key, [_delivery_doc(d) for d in deliveries])
        claimed = await conn.fetchval("event_key_claim", project=project, key=idempotency_key, event_id=event_id,
                                      now=now, window=IDEMPOTENCY_WINDOW)
        if claimed is None:
            held = await conn.fetchrow("event_key_get", project=project, key=idempotency_key)
            deliveries = [dict(r) for r in await conn.fetch("event_deliveries_list", event_id=held["event_id"])]
            result = EventResult(held["event_id"], False, max(0.0, (now - held["created_at"]).total_seconds()),
                                 type, idempotency_key, [_delivery_doc(d) for d in deliveries])
            COUNTERS.inc("events_published_total", outcome="deduplicated")
            return result
        await conn.execute("event_insert", event_id=event_id, project=project, type=type,
                           idempotency_key=idempotency_key, partition_key=partition_key, trigger_id=None, source="bus",
                           occurred_at=when, now=now, envelope=envelope)
        await wait_index.correlate(conn, project, type, event_id, now, hashes, values, now)
        deliveries = []
        for sub in subscribers:
            deliveries.append(await _deliver(conn, project, sub, env, envelope, now, when))
    COUNTERS.inc("events_published_total", outcome="created")
    return EventResult(event_id, True, 0.0, type, idempotency_key, deliveries)


def _same_envelope(held, project: str, type: str, data: Any, key: str, partition_key: str | None,
                   when: datetime | None) -> bool:
    """Is the stored event the one described (`when` compared only when the client gave `occurred_at`)?"""
    stored = json.loads(held["envelope"])
    return (held["project_id"] == project and held["type"] == type and held["idempotency_key"] == key
            and held["partition_key"] == partition_key and stored.get("data") == json.loads(encode_json(data))
            and (when is None or held["occurred_at"] == when))


def _delivery_doc(d: dict) -> dict:
    return {"trigger_id": d["trigger_id"], "outcome": d["outcome"], "run_id": d.get("run_id")}


async def _deliver(conn, project: str, sub, env: dict, envelope: str, now: datetime, when: datetime) -> dict:
    tid, ir = sub["trigger_id"], sub["ir"]
    deliver = ir.get("deliver") or {}
    event_id = env["id"]
    max_age = deliver.get("max_age_ms")
    if max_age is not None and (now - when).total_seconds() * 1000 > max_age:
        err = A44Error(E_EVENT_TOO_OLD, f"event occurred at {env['occurred_at']}, older than the trigger's "
                                        f"deliver.maxAge ({max_age} ms)")
        await dead_letter(conn, project, (sub["workflow_ir"] or {}).get("queue"), sub["workflow_id"], tid, envelope,
                          err, now, event_id=event_id)
        await conn.execute("event_delivery_insert", event_id=event_id, trigger_id=tid, project=project,
                           outcome="dead_lettered", run_id=None, now=now)
        COUNTERS.inc("event_too_old_total", trigger=tid)
        return {"trigger_id": tid, "outcome": "dead_lettered", "run_id": None}
    if not await filter_matches(ir, env):
        COUNTERS.inc("event_filter_miss_total", trigger=tid)
        if deliver.get("drop_on_filter_miss", True):
            return {"trigger_id": tid, "outcome": "dropped", "run_id": None}
        await conn.execute("event_delivery_insert", event_id=event_id, trigger_id=tid, project=project,
                           outcome="filtered", run_id=None, now=now)
        return {"trigger_id": tid, "outcome": "filtered", "run_id": None}
    if sub["version"] is None:  # pragma: no cover - publish stores workflows before their triggers
        return {"trigger_id": tid, "outcome": "no_workflow", "run_id": None}
    data = env["data"]
    tctx = {"id": tid, "type": "event", "event": env}
    workflow_ir = sub["workflow_ir"] or {}
    try:
        pk = await render_key(ir["partition_key"], data, tctx, "the trigger's partition key") \
            if ir.get("partition_key") is not None else env.get("partition_key")
        if pk is None:
            pk = await workflow_partition_key(workflow_ir, data, tctx)
    except A44Error:
        pk = env.get("partition_key")
    if workflow_ir.get("buffer"):      # debounce / batch: the event joins its key's buffer, its flush starts the run
        from ..buffers import intake  # here: runtime/buffers builds on ingestion's run creation

        done = await intake.deliver(conn, project, sub["workflow_id"], workflow_ir, trigger_id=tid, env=env,
                                    raw=envelope, partition_key=pk, now=now)
        return {k: done[k] for k in ("trigger_id", "outcome", "run_id", "buffer_id", "dead_letter_id") if k in done}
    made = await create_run_in(conn, project, sub["workflow_id"], sub["version"], data,
                               f"{tid}:{env['idempotency_key']}", trigger_id=tid, event_id=event_id,
                               partition_key=pk, queue=workflow_ir.get("queue"), now=now)
    outcome = "created" if made.created else "deduplicated"
    await conn.execute("event_delivery_insert", event_id=event_id, trigger_id=tid, project=project, outcome=outcome,
                       run_id=made.run_id, now=now)
    return {"trigger_id": tid, "outcome": outcome, "run_id": made.run_id}


async def list_events(store, project: str, type: str | None = None, limit: int = 50, offset: int = 0) -> list[dict]:
    return [dict(r) for r in await store.fetch("events_list", project=project, type=type, limit=limit, offset=offset)]


async def get_event(store, project: str, event_id: str) -> dict:
    row = await store.fetchrow("event_get", event_id=event_id, project=project)
    if row is None:
        raise A44Error(E_EVENT_NOT_FOUND, f"no event {event_id} in {project}",
                       hint="`a44 automation events list` lists them")
    doc = dict(row)
    doc["envelope"] = json.loads(doc["envelope"])
    doc["deliveries"] = [_delivery_doc(dict(d)) for d in await store.fetch("event_deliveries_list", event_id=event_id)]
    return doc

