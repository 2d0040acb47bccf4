"""CLI options that work the same locally and against a live daemon (`--api-url`, no database URL): the event id
of `events publish --id`; the target options of `runs` before or after its sub-verb; where in a `dlq redrive
--filter` the mistake is."""

from __future__ import annotations

import json

import pytest

from tests.cli_support import run_cli

from .support import api, target  # noqa: F401 - the fixtures


@pytest.fixture
def cli(target, capsys):
    """cli(where, *argv) -> (exit code, stdout, stderr); `where` is "local" or "remote"."""
    def call(where: str | None, *argv: str):
        return run_cli(capsys, *argv, *(target(where) if where else ()))
    return call


def run_cli_plain(cli, *argv):
    """The verb with the target options it names itself, in the environment set last."""
    return cli(None, *argv)


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


def test_runs_sub_verbs_take_the_target_options_after_the_sub_verb(api, cli, target, monkeypatch):
    runs = [api("POST", "/runs", {"workflow": "wf_hooked", "idempotency_key": f"k-{i}"}, as_="write")[1]["run_id"]
            for i in range(3)]
    # `--api-url` after the sub-verb (and no database URL at all: it can only have gone to the daemon)
    code, out, err = cli("remote", "automation", "runs", "cancel", runs[0], "--reason", "late", "--format", "json")
    assert code == 0 and json.loads(out)["outcome"] == "cancelled", err
    # `--remote` (A44_API_URL) after the sub-verb, `--format` before it: each level keeps what it was given
    target("remote")
    monkeypatch.setenv("A44_API_URL", api.live.url)
    code, out, err = run_cli_plain(cli, "automation", "runs", "--format", "json", "cancel", runs[1], "--remote", "-v")
    assert code == 0 and json.loads(out)["outcome"] == "cancelled" and api.live.url in err, (out, err)
    code, out, err = run_cli_plain(cli, "automation", "runs", "--remote", "cancel", runs[2], "--format", "json")
    assert code == 0 and json.loads(out)["outcome"] == "cancelled", err
    code, out, err = run_cli_plain(cli, "automation", "runs", "skip", runs[2], "--step", "only", "--reason", "x",
                                   "--remote")
    assert code == 1 and err.startswith("E_") and "Traceback" not in err   # refused by the daemon, not by argparse
    code, out, err = run_cli_plain(cli, "automation", "runs", "--local", "resolve", runs[2], "--step", "only",
                                   "--outcome", "failed", "--remote")
    assert code == 2 and "E_INVALID_ARGUMENT --local and --remote exclude each other" in err
    monkeypatch.delenv("A44_API_URL")
    code, out, err = cli("local", "automation", "runs", "--state", "cancelled", "--format", "json")
    assert sorted(r["run_id"] for r in json.loads(out)["runs"]) == sorted(runs)


def test_a_dlq_filter_mistake_shows_where_it_is_over_rest_as_locally(api, cli):
    status, doc = api("POST", "/queues/q_default/dead-letters/redrive", {"filter": "error_code ==", "dry_run": True})
    assert status == 400 and doc["error"]["code"] == "E_DLQ_FILTER"
    diag = doc["error"]["details"]["diagnostics"][0]
    assert diag["column"] == 14 and diag["code"].startswith("A44") and doc["error"]["details"]["filter"] == "error_code =="
    seen = {}
    for where in ("local", "remote"):
        text = cli(where, "automation", "dlq", "redrive", "q_default", "--dry-run", "--filter", "error_code ==")
        as_json = cli(where, "automation", "dlq", "redrive", "q_default", "--dry-run", "--filter", "error_code ==",
                      "--format", "json")
        seen[where] = (text, as_json)
    local, remote = seen["local"], seen["remote"]
    assert local[0][0] == remote[0][0] == 2
    assert remote[0][2].startswith("--filter:1:14: A44") and remote[0][2] == local[0][2]
    assert json.loads(remote[1][1]) == json.loads(local[1][1])
    assert json.loads(remote[1][1])["error"]["diagnostics"][0]["column"] == 14
