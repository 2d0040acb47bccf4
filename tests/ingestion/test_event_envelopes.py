"""POST /v1/automation/events against the real HTTP server and store: an envelope that cannot be deserialized is
kept byte for byte as a dead letter (§10.3), and a client-given envelope id is kept and idempotent (§8.1)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from anthares44.automation.runtime.queues import dlq_list, dlq_show, envelope_bytes

from .support import P, bearer, request
from .test_api import token

EVENTS = "/v1/automation/events"
# recent, so the subscribed triggers' deliver.maxAge sends nothing to the DLQ
OCCURRED = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)


def post(live, tok, body: bytes, extra: list | None = None):
    return request(live.port, "POST", EVENTS, body, bearer(tok) + (extra or []))


def envelope(**over) -> bytes:
    doc = {"id": "evt_client01", "type": "billing.refund.requested", "idempotency_key": "refund:c:1",
           "partition_key": "cust_1", "occurred_at": OCCURRED.isoformat(),
           "data": {"amountCents": 900000, "currency": "BRL"}}
    doc.update(over)
    return json.dumps({k: v for k, v in doc.items() if v is not None}).encode()


@pytest.mark.parametrize("body", [
    b"{not json",
    b"\xff\xfe\x00 raw bytes \x00\x01",
    b"[1, 2]",
    b"",
    envelope(type=""),
    envelope(id="run_not_an_event_id"),
    envelope(occurred_at="yesterday"),
], ids=["not-json", "not-utf8", "not-object", "empty", "bad-type", "bad-id", "bad-occurred-at"])
def test_an_undeserializable_envelope_is_dead_lettered_with_its_bytes(live, project, body):
    tok = token(live)
    status, doc, _ = post(live, tok, body)
    assert status == 400 and doc["error"]["code"] == "E_ENVELOPE_INVALID", doc
    dl_id = doc["error"]["dead_letter_id"]
    assert dl_id in doc["error"]["message"] and f"dlq show {dl_id}" in doc["error"]["hint"]
    shown = live.call(dlq_show, P, dl_id)
    assert envelope_bytes(shown) == body
    assert (shown["queue"], shown["error_code"], shown["workflow_id"]) == ("q_default", "E_ENVELOPE_INVALID", None)
    assert live.counts()["events"] == 0


def test_a_refusal_that_is_not_about_the_envelope_writes_nothing(live, project):
    tok = token(live)
    status, doc, _ = post(live, tok, envelope(idempotency_key=None))
    assert status == 400 and doc["error"]["code"] == "E_IDEMPOTENCY_KEY_REQUIRED"
    assert request(live.port, "POST", EVENTS, b"{not json")[0] == 401  # no token: not even read
    assert live.call(dlq_list, P) == []


def test_a_client_given_id_is_kept_and_the_same_id_twice_is_one_event(live, project):
    tok = token(live)
    s1, first, _ = post(live, tok, envelope())
    s2, again, _ = post(live, tok, envelope())
    assert (s1, first["event_id"], first["created"]) == (202, "evt_client01", True)
    assert (s2, again["event_id"], again["created"]) == (200, "evt_client01", False)
    assert again["deliveries"] == first["deliveries"] and len(first["deliveries"]) == 3
    _, stored, _ = request(live.port, "GET", f"{EVENTS}/evt_client01", b"", bearer(tok))
    assert stored["envelope"]["id"] == "evt_client01"
    # the same envelope without occurred_at (the server's clock would have filled it) is the same event too
    assert post(live, tok, envelope(occurred_at=None))[1]["event_id"] == "evt_client01"
    assert live.counts()["events"] == 1


@pytest.mark.parametrize("change", [{"data": {"amountCents": 1, "currency": "BRL"}}, {"type": "billing.other"},
                                    {"idempotency_key": "refund:c:2"},
                                    {"occurred_at": (OCCURRED + timedelta(seconds=1)).isoformat()}],
                         ids=["data", "type", "key", "occurred-at"])
def test_the_same_id_with_another_envelope_is_refused(live, project, change):
    tok = token(live)
    assert post(live, tok, envelope())[0] == 202
    status, doc, _ = post(live, tok, envelope(**change))
    assert status == 409 and doc["error"]["code"] == "E_EVENT_ID_CONFLICT", doc
    assert "evt_client01" in doc["error"]["message"]
    assert live.counts()["events"] == 1 and live.call(dlq_list, P) == []


def test_an_id_taken_in_another_project_is_refused_without_showing_it(live, project):
    assert post(live, token(live), envelope())[0] == 202
    status, doc, _ = post(live, token(live, project="pj_other"), envelope())
    assert status == 409 and doc["error"]["code"] == "E_EVENT_ID_CONFLICT"
    assert P not in json.dumps(doc) and "cust_1" not in json.dumps(doc)
