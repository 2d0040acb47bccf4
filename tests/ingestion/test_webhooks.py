"""Signed webhooks (§9) against a live server on 127.0.0.1."""

from __future__ import annotations

import json
import time
from datetime import timedelta

from prometheus_client.parser import text_string_to_metric_families

from anthares44.automation.runtime.ingestion.metrics import COUNTERS
from anthares44.automation.runtime.ingestion.triggers import list_triggers, reveal_secret, rotate_secret

from .support import P, request, signed_headers

PATH = f"/v1/{P}/trg_hook"


def test_publish_stores_standalone_and_inline_triggers(live, project):
    rows = {r["trigger_id"]: r for r in live.call(list_triggers, P)}
    assert rows["trg_hook"]["type"] == "webhook" and rows["trg_hook"]["origin"] == "standalone"
    assert rows["trg_inline_flow_1"]["origin"] == "inline" and rows["trg_inline_flow_1"]["type"] == "webhook"
    assert rows["trg_refund_large"]["event"] == "billing.refund.requested"
    assert rows["trg_refund_large"]["ir"]["filter"]["cel"].startswith("data.amountCents")
    assert project.startswith("whsec_") and len(project) == 6 + 64


def test_created_then_deduplicated_and_run_records(live, project):
    body = json.dumps({"invoiceId": "inv_1", "amountCents": 10}).encode()
    s1, d1, _ = request(live.port, "POST", PATH, body, signed_headers(project, body, key="inv_1:paid:v1"))
    assert s1 == 202 and d1["run_id"].startswith("run_")
    s2, d2, h2 = request(live.port, "POST", PATH, body, signed_headers(project, body, key="inv_1:paid:v1"))
    assert (s2, d2["run_id"]) == (200, d1["run_id"]) and h2["A44-Deduplicated"] == "true"
    run = live.run(live.store.get_run(d1["run_id"]))
    assert run["trigger_id"] == "trg_hook" and run["workflow_id"] == "wf_hooked"
    assert run["input"] == {"invoiceId": "inv_1", "amountCents": 10}
    ev = live.run(live.store.fetchrow("event_get", event_id=run["event_id"], project=P))
    env = json.loads(ev["envelope"])
    assert env["id"] == run["event_id"] and env["id"].startswith("evt_") and env["trigger_id"] == "trg_hook"
    assert env["idempotency_key"] == "inv_1:paid:v1" and env["attempt"] == 1 and env["data"] == run["input"]


def test_absent_key_is_derived_from_the_body(live, project):
    body = b'{"a": 1}'
    s1, d1, _ = request(live.port, "POST", PATH, body, signed_headers(project, body))
    s2, d2, _ = request(live.port, "POST", PATH, body, signed_headers(project, body))
    other = b'{"a": 2}'
    s3, d3, _ = request(live.port, "POST", PATH, other, signed_headers(project, other))
    assert (s1, s2, s3) == (202, 200, 202) and d1 == d2 and d3 != d1


def test_rejections_write_nothing_and_count(live, project):
    body = b'{"x": 1}'
    before = live.counts()
    # 30 s past the 300 s limit: `now` is read once, truncated, and the requests before these take seconds on a
    # loaded machine (with +301 a request 1 s later was inside the window: 202 instead of 408)
    now = int(time.time())
    cases = [
        (405, "GET", PATH, b"", []),
        (404, "POST", f"/v1/{P}/trg_nope", body, signed_headers(project, body)),
        (404, "POST", "/v1/pj_other/trg_hook", body, signed_headers(project, body)),
        (404, "POST", f"/v1/{P}/trg_refund_large", body, signed_headers(project, body)),  # not a webhook
        (415, "POST", PATH, body, signed_headers(project, body, content_type="text/plain")),
        (401, "POST", PATH, body, [("Content-Type", "application/json")]),
        (401, "POST", PATH, body, signed_headers("whsec_wrong", body)),
        (408, "POST", PATH, body, signed_headers(project, body, ts=now - 330)),
        (408, "POST", PATH, body, signed_headers(project, body, ts=now + 330)),
        (400, "POST", PATH, b"{nope", signed_headers(project, b"{nope")),
        (413, "POST", PATH, b"x" * (1024 * 1024 + 1), signed_headers(project, b"x" * (1024 * 1024 + 1))),
    ]
    for status, method, path, b, headers in cases:
        got, doc, _ = request(live.port, method, path, b, headers)
        assert got == status, (status, method, path, doc)
    assert live.counts() == before
    assert COUNTERS.get("webhook_rejected_total") == len(cases)
    assert COUNTERS.get("webhook_rejected_total", reason="timestamp_skew") == 2
    s, doc, _ = request(live.port, "POST", PATH, body, signed_headers(project, body, ts=now - 330))
    assert doc["error"]["code"] == "E_TIMESTAMP_SKEW"
    s, text, _ = request(live.port, "GET", "/metrics")
    samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    assert [s.value for s in samples if s.name == "webhook_rejected_total"
            and s.labels.get("reason") == "timestamp_skew"] == [3]          # this process's counter (worker label)
    assert [s.value for s in samples if s.name == "automation_webhook_rejected_total"
            and s.labels == {"reason": "timestamp_skew"}] == [3]            # the persisted total of every process


def test_exactly_1mb_is_accepted(live, project):
    body = b'{"p":"' + b"x" * (1024 * 1024 - 8) + b'"}'
    assert len(body) == 1024 * 1024
    s, d, _ = request(live.port, "POST", PATH, body, signed_headers(project, body))
    assert s == 202


def test_secret_shown_once_and_rotation_keeps_old_one_48h(live, project):
    import pytest

    from anthares44.automation.errors import A44Error

    assert live.call(reveal_secret, P, "trg_hook") == project
    with pytest.raises(A44Error) as e:
        live.call(reveal_secret, P, "trg_hook")
    assert e.value.code == "E_SECRET_ALREADY_SHOWN"
    rotated = live.call(rotate_secret, P, "trg_hook")
    new = rotated["secret"]
    assert new != project
    for i, secret in enumerate((project, new)):
        body = json.dumps({"i": i}).encode()
        assert request(live.port, "POST", PATH, body, signed_headers(secret, body))[0] == 202
    # 48 h later the old secret is refused, the new one still works (the server's clock moves, not the test's)
    live.run(_expire_now(live.store, project))
    body = b'{"i": 9}'
    assert request(live.port, "POST", PATH, body, signed_headers(project, body))[0] == 401
    assert request(live.port, "POST", PATH, body, signed_headers(new, body))[0] == 202
    assert rotated["previous_valid_until"] - live.store.clock.now() > timedelta(hours=47, minutes=59)


async def _expire_now(store, secret):
    # equivalent to the clock passing previous_valid_until (the server uses the system clock here)
    async with store.connection("test") as conn, conn.transaction():
        await conn.execute("update automation.webhook_secrets set expires_at = now() - interval '1 second' "
                           "where secret = $1", secret)
