"""Each sender against a real loopback receiver: the signed webhook verified by the ingestion's own signature
check, the Slack summary, the email through aiosmtpd; and the outcome of what a receiver answers."""

from __future__ import annotations

import json
import time

from tests.notify.conftest import PAYLOAD, add_channel, enqueue, row
from tests.notify.receivers import HttpReceiver


def test_webhook_is_signed_as_our_webhooks_verify_and_carries_the_key(store, aio, receiver, deliverer):
    add_channel(store, aio, "squad-billing", "webhook", {"url": receiver.hook, "secretRef": "sec_hook"})
    nid = enqueue(store, aio, "squad-billing", "alr_1:firing:squad-billing")
    assert aio(deliverer.deliver_due()) == 1
    [req] = receiver.requests
    assert req["verified"] is True
    assert req["headers"]["Idempotency-Key"] == req["headers"]["A44-Idempotency-Key"] == "alr_1:firing:squad-billing"
    doc = json.loads(req["body"])
    assert doc["type"] == "a44.notification" and doc["id"] == nid and doc["kind"] == "firing"
    assert doc["severity"] == "p2" and doc["channel"] == "squad-billing" and doc["payload"] == PAYLOAD
    r = row(store, aio, nid)
    assert r["state"] == "delivered" and r["delivered_at"] is not None and r["attempts"] == 1
    assert aio(deliverer.deliver_due()) == 0          # delivered: never claimed again
    assert len(receiver.requests) == 1


def test_a_wrong_secret_is_refused_by_the_receiver_and_fails_loudly(store, aio, receiver, deliverer, secrets, caplog):
    secrets._static["sec_hook"] = "whsec_" + "cd" * 32
    add_channel(store, aio, "squad-billing", "webhook", {"url": receiver.hook, "secretRef": "sec_hook"})
    nid = enqueue(store, aio, "squad-billing", "k1")
    with caplog.at_level("WARNING", logger="a44.notify"):
        aio(deliverer.deliver_due())
    assert receiver.requests[0]["verified"] is False
    r = row(store, aio, nid)
    assert r["state"] == "failed" and r["last_error"].startswith("E_NOTIFY_REFUSED") and "401" in r["last_error"]
    line = caplog.records[-1].getMessage()
    assert "squad-billing" in line and f"a44 monitor notifications retry {nid}" in line


def test_slack_summary_has_severity_workflow_run_step_error_attempts_and_the_next_command(store, aio, deliverer):
    slack = HttpReceiver()
    try:
        add_channel(store, aio, "oncall-slack", "slack", {"url": slack.hook})
        enqueue(store, aio, "oncall-slack", "alr_1:firing:oncall-slack")
        aio(deliverer.deliver_due())
        [req] = slack.requests
        assert req["headers"]["Idempotency-Key"] == "alr_1:firing:oncall-slack"
        body = json.loads(req["body"])
        assert body["text"].startswith("[P2] firing: wf_invoice_settle failed")
        text = json.dumps(body["blocks"])
        for part in ("P2", "wf_invoice_settle", "run_01JA", "settle", "inv_8812", "E_UPSTREAM_503",
                     "upstream answered 503", "*Attempts*\\n5",
                     "```a44 automation replay run_01JA --from-step settle```"):
            assert part in text, part
    finally:
        slack.close()


def test_email_over_smtp_with_a_message_id_derived_from_the_key(store, aio, smtp, deliverer):
    config = {"from": "a44@example.com", "to": ["oncall@example.com", "lead@example.com"],
              "smtp": {"host": "127.0.0.1", "port": smtp.port, "starttls": False}}
    add_channel(store, aio, "oncall-mail", "email", config)
    nid = enqueue(store, aio, "oncall-mail", "alr_1:firing:oncall-mail")
    aio(deliverer.deliver_due())
    [m] = smtp.messages
    assert m["from"] == "a44@example.com" and m["to"] == ["oncall@example.com", "lead@example.com"]
    msg = m["message"]
    assert msg["Subject"] == "[P2] firing: wf_invoice_settle failed"
    assert msg["X-A44-Idempotency-Key"] == "alr_1:firing:oncall-mail"
    assert msg["Message-ID"].startswith("<a44.") and msg["Message-ID"].endswith("@example.com>")
    body = msg.get_content()
    assert "a44 automation replay run_01JA --from-step settle" in body and "Attempts: 5" in body
    assert row(store, aio, nid)["state"] == "delivered"
    # a second notification with the same key gets the same Message-ID (the receiver's dedupe key)
    from anthares44.automation.runtime.notify.messages import message_id
    assert message_id("alr_1:firing:oncall-mail", "a44@example.com") == msg["Message-ID"]


def test_an_smtp_recipient_refused_for_good_fails_at_once(store, aio, smtp, deliverer):
    add_channel(store, aio, "bad-mail", "email", {"from": "a44@example.com", "to": ["refused@example.com"],
                                                 "smtp": {"host": "127.0.0.1", "port": smtp.port, "starttls": False}})
    nid = enqueue(store, aio, "bad-mail", "k-mail")
    aio(deliverer.deliver_due())
    r = row(store, aio, nid)
    assert r["state"] == "failed" and "550" in r["last_error"] and r["attempts"] == 1


def test_a_receiver_that_hangs_is_cut_by_the_timeout_and_retried(store, aio, deliverer):
    hanging = HttpReceiver(script=["hang"])
    try:
        add_channel(store, aio, "slow", "slack", {"url": hanging.hook})
        nid = enqueue(store, aio, "slow", "k-hang")
        t0 = time.monotonic()
        aio(deliverer.deliver_due())
        assert time.monotonic() - t0 < 30            # bounded by the 2 s send timeout, not the hour it hangs
        r = row(store, aio, nid)
        assert r["state"] == "pending" and r["attempts"] == 1 and "did not answer within 2s" in r["last_error"]
    finally:
        hanging.close()
