"""Fixtures of the notification tests: loopback receivers, channels and notifications seeded through the
package's own functions (channels.create, outbox.enqueue), and a Deliverer on the test's store and clock."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from anthares44.automation.runtime.notify import channels, outbox
from anthares44.automation.runtime.notify.delivery import Deliverer, DeliverySettings
from anthares44.automation.runtime.secrets.source import SecretSource
from tests.notify.receivers import HttpReceiver, SmtpReceiver

PROJECT = "pj_default"
SECRET = "whsec_" + "ab" * 32
PAYLOAD = {"title": "[P2] firing: wf_invoice_settle failed", "workflow": "wf_invoice_settle", "run_id": "run_01JA",
           "failed_step": "settle", "partition_key": "inv_8812", "error_code": "E_UPSTREAM_503",
           "error_message": "upstream answered 503", "attempts": 5,
           "next_action": "a44 automation replay run_01JA --from-step settle"}
FAST = DeliverySettings(retry_base=timedelta(seconds=2), retry_max=timedelta(seconds=60), max_attempts=4,
                        timeout=timedelta(seconds=2))


@pytest.fixture
def receiver():
    r = HttpReceiver(secret=SECRET)
    yield r
    r.close()


@pytest.fixture
def smtp():
    s = SmtpReceiver()
    yield s
    s.stop()


@pytest.fixture
def secrets():
    return SecretSource({"sec_hook": SECRET, "sec_smtp_user": "a44", "sec_smtp_pass": "pw"}, use_env=False)


@pytest.fixture
def deliverer(store, aio, secrets):
    d = Deliverer(store, secrets, FAST, rng=random.Random(7))
    yield d
    aio(d.close())


def add_channel(store, aio, name: str, kind: str, config: dict) -> None:
    aio(channels.create(store, PROJECT, name, kind, config))


def enqueue(store, aio, channel: str, key: str, *, kind: str = "firing", severity: str = "p2",
            payload: dict | None = None, alert_id: str = "alr_1") -> int:
    return aio(outbox.enqueue(store, PROJECT, channel, idempotency_key=key, kind=kind, severity=severity,
                              payload=PAYLOAD if payload is None else payload, alert_id=alert_id))


def row(store, aio, nid: int) -> dict:
    return aio(outbox.get(store, PROJECT, nid))
