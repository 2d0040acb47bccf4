"""`a44 automation runs export`: a random sample of a workflow's finished runs as JSON lines, redacted, with their
attempts: runs made under the test kit come back out through the real verb."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from anthares44.automation.cli.main import main
from anthares44.automation.testkit import Fail, Ok

WF = """
name: card-charge
version: 1
steps:
  - id: charge
    uses: connector/payments.charge
    timeout: 10s
    retry: {max: 2, strategy: fixed, base: 1s}
    with: {amount: "{{ input.amount }}"}
"""
NOW = datetime.now(UTC).replace(microsecond=0).isoformat()   # the verb reads the wall clock: runs made "now"


@pytest.mark.a44_env(start=NOW)
def test_export_writes_finished_runs_with_their_attempts_redacted(a44_env, monkeypatch, capsys):
    env = a44_env
    env.mock("connector/payments.charge", Fail("E_UPSTREAM_503"), Ok({"charge": "ch_1", "api_key": "sk_live_1"}))
    env.publish(WF)
    for i in range(3):
        env.run("card-charge", {"amount": i, "card": {"token": f"tok_{i}"}}, idempotency_key=f"k{i}")
    env.run_until_idle()
    env.mock("connector/payments.charge", Fail("E_UPSTREAM_503"))
    waiting = env.run("card-charge", {"amount": 9}, idempotency_key="k9")     # not finished: not exported
    assert waiting.state == "waiting"

    monkeypatch.setenv("A44_DATABASE_URL", env.store.url)
    assert main(["automation", "runs", "export", "--workflow", "card-charge", "--since", "1d", "--sample", "2"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    assert len(lines) == 2
    for h in lines:
        run = h["run"]
        assert run["state"] == "succeeded" and run["workflow_id"] == "wf_card_charge"
        assert run["input"]["card"] == {"token": "[redacted]"}
        assert [(a["step_id"], a["attempt"], a["status"]) for a in h["attempts"]] == \
            [("charge", 1, "failed"), ("charge", 2, "succeeded")]
        assert h["attempts"][1]["result"] == {"charge": "ch_1", "api_key": "[redacted]"}
        assert h["attempts"][0]["error_code"] == "E_UPSTREAM_503"
    assert len({h["run"]["run_id"] for h in lines}) == 2
    assert main(["automation", "runs", "export", "--workflow", "card-charge", "--sample", "10"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_an_exported_history_runs_again_meeting_the_world_as_it_did(a44_env):
    from anthares44.automation.app.exports import export_runs

    env = a44_env
    env.mock("connector/payments.charge", Fail("E_UPSTREAM_503", "busy"), Ok({"charge": "ch_7"}))
    env.publish(WF)
    original = env.run("card-charge", {"amount": 5}, idempotency_key="k1")
    env.run_until_idle()

    async def collect():
        return [h async for h in export_runs(env.store, env.project, "wf_card_charge", since=timedelta(days=1),
                                             sample=10)]

    [history] = env.call(collect())
    env.mock("connector/payments.charge", Ok({"charge": "never"}))    # the script the replay must replace
    again = env.replay_history(history, idempotency_key="k1-again")
    env.run_until_idle()

    assert again.id != original.id and again.state == "succeeded"
    assert [(a["status"], a["error_code"], a["result"]) for a in again.attempts("charge")] == \
        [("failed", "E_UPSTREAM_503", None), ("succeeded", None, {"charge": "ch_7"})]
