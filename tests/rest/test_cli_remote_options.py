"""CLI options that work the same locally and against a live daemon (`--api-url`, no database URL): the event id
of `events publish --id`."""

from __future__ import annotations

import json

import pytest

from tests.cli_support import run_cli

from .support import api, target  # noqa: F401 - the fixtures


@pytest.fixture
def cli(target, capsys):
    """cli(where, *argv) -> (exit code, stdout, stderr); `where` is "local" or "remote"."""
    return lambda where, *argv: run_cli(capsys, *argv, *target(where))


def publish(cli, where, event_id, data):
    return cli(where, "automation", "events", "publish", "--type", "billing.refund.requested", "--data",
               json.dumps(data), "--idempotency-key", f"key-{event_id}", "--id", event_id, "--format", "json")


@pytest.mark.parametrize("where", ["local", "remote"])
def test_events_publish_takes_the_clients_event_id_idempotently(cli, where):
    event_id = f"evt_cli_{where}"
    code, out, err = publish(cli, where, event_id, {"amountCents": 900})
    assert code == 0, err
    first = json.loads(out)
    assert first["event_id"] == event_id and first["created"] is True
    code, out, err = publish(cli, where, event_id, {"amountCents": 900})
    again = json.loads(out)
    assert code == 0 and again["event_id"] == event_id and again["created"] is False
    code, out, err = publish(cli, where, event_id, {"amountCents": 1})
    assert code == 1 and err.startswith("E_EVENT_ID_CONFLICT ") and "Traceback" not in err
    code, out, err = publish(cli, where, "not-an-evt-id", {"amountCents": 1})
    assert code != 0 and "evt_" in err and "Traceback" not in err
