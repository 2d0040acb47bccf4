"""The same operation through the CLI against the database (local) and through the CLI against a live daemon
(`--api-url`, no database URL at all) prints the same JSON document."""

from __future__ import annotations

import json

import pytest

from anthares44.automation.runtime import queues as rq
from tests.cli_support import run_cli
from tests.ingestion.support import P
from tests.runtime.test_api import finish_run

from .support import api, target  # noqa: F401 - the fixtures


@pytest.fixture
def both(target, capsys):
    """cli(where, *argv) -> the parsed JSON the verb printed, `where` being "local" or "remote"."""
    def cli(where: str, *argv: str):
        code, out, err = run_cli(capsys, *argv, *target(where), "--format", "json")
        assert code == 0, (where, argv, out, err)
        return json.loads(out)
    return cli


def _same(both, *argv, drop=()):
    local, remote = both("local", *argv), both("remote", *argv)
    for doc in (local, remote):
        for key in drop:
            doc.pop(key, None)
        for run in doc.get("runs", ()):
            run.pop("duration_ms", None)   # of a run not finished: until the instant it is read
    assert local == remote, argv
    return local


def test_cli_local_and_remote_print_the_same_json(api, both):
    s, doc = api("POST", "/runs", {"workflow": "wf_hooked", "idempotency_key": "k-1"}, as_="write")
    run_id = doc["run_id"]
    api.live.call(finish_run, run_id, "failed", failed_step="only", error_code="E_UPSTREAM_400")
    dl = api.live.call(rq.deliver_envelope, P, "wf_hooked", b'{"broken')["dead_letter_id"]
    assert both("local", "monitor", "alert", "create", "--name", "dlq-up", "--metric", "automation.dlq_depth",
                "--condition", "> 5")["outcome"] == "created"
    assert both("remote", "monitor", "channel", "create", "--name", "squad", "--type", "slack", "--url",
                "http://127.0.0.1:9/hook")["name"] == "squad"

    assert _same(both, "automation", "queues", "stats")["queues"]
    assert _same(both, "automation", "dlq", "list")["dead_letters"][0]["dead_letter_id"] == dl
    assert _same(both, "automation", "dlq", "show", dl, "--with-attempts")["envelope"] == '{"broken'
    assert _same(both, "automation", "dlq", "redrive", "q_default", "--dry-run", "--filter",
                 "error_code == 'E_ENVELOPE_INVALID'", drop=("elapsed_s", "rate_observed_per_s"))["matched"] == 1
    assert _same(both, "automation", "replay", run_id, "--from-step", "only", "--dry-run")["matched"] == 1
    assert _same(both, "monitor", "alert", "list")["rules"][0]["name"] == "dlq-up"
    assert _same(both, "monitor", "alert", "show", "dlq-up")["condition"] == "> 5"
    assert _same(both, "monitor", "channel", "list")["channels"][0]["name"] == "squad"
    assert _same(both, "monitor", "notifications")["notifications"] == []
    assert len(_same(both, "auth", "token", "list")["tokens"]) == 3
    assert _same(both, "automation", "metrics", "--name", "automation_queue")["metrics"]
    assert _same(both, "automation", "partitions", run_id)["target"] == run_id
    # the changes go through as well: replayed remotely, the local view sees it
    assert both("remote", "automation", "replay", run_id, "--from-step", "only")["replayed"] == 1
    assert _same(both, "automation", "runs")["runs"][0]["state"] == "pending"


def test_flow_verbs_local_and_remote(api, both):
    from datetime import UTC, datetime, timedelta

    until = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0).isoformat()
    key = f"http:{P}:erp.example.com"
    paused = both("local", "automation", "flow", "pause", key, "--until", until, "--reason", "maintenance",
                  "--by", "ana")
    assert paused["paused_by"] == "ana" and paused["paused"] and paused["woken"] == 0
    listed = _same(both, "automation", "flow", "list")["keys"]
    assert [(k["key"], k["source"], k["reason"]) for k in listed] == [(key, "operator", "maintenance")]
    again = both("remote", "automation", "flow", "pause", key, "--until", until)
    assert again["paused_by"].startswith("token:")       # the daemon records the token, not a claimed name
    assert both("remote", "automation", "flow", "resume", key)["paused"] is False
    assert _same(both, "automation", "flow", "list")["keys"] == []
