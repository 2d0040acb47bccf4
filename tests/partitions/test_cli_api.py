"""The partitions of a `partial` run as a person sees them: `a44 automation partitions`, `runs --state partial`,
`runs skip` (in-process CLI on the test database) and the REST API (a live server, API tokens by scope)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from anthares44.automation.runtime.ingestion.tokens import create_token
from tests.cli_support import run_cli
from tests.ingestion.support import LiveServer, bearer, request
from tests.partitions.conftest import BAD, SLOW
from tests.runtime.engine_support import PROJECT


def cli(capsys, *argv):
    return run_cli(capsys, "automation", *argv)


@pytest.fixture
def db(pg_url, monkeypatch):
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    monkeypatch.delenv("A44_PROJECT", raising=False)
    return pg_url


def test_partitions_runs_partial_and_skip_on_the_command_line(partial_run, db, capsys):
    _api, _eng, run_id = partial_run
    code, out, _ = cli(capsys, "partitions", run_id, "--state", "failed", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and [p["partition"] for p in doc["partitions"]] == [BAD]
    assert doc["partitions"][0]["error_code"] == "E_UPSTREAM_422"
    # "was 2026-07-02 processed, when, by which run, with how many rows?" asked of the workflow
    code, out, _ = cli(capsys, "partitions", "daily-load", "--partition", "2026-07-02")
    assert code == 0 and run_id in out and "success" in out and "10/10/0" in out
    code, out, _ = cli(capsys, "partitions", run_id, "--format", "json")
    counts = json.loads(out)["counts"]
    code, out, _ = cli(capsys, "logs", run_id)                # the run's log says how its partitions stand
    assert code == 0 and ("partitions of load: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
                          + f" (a44 automation partitions {run_id})\n") in out
    assert counts["failed"] == counts["timeout"] == 1
    code, out, _ = cli(capsys, "runs", "--state", "partial", "--format", "json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)["runs"]] == [run_id]
    code, out, err = cli(capsys, "partitions", run_id, "--state", "broken")
    assert code == 2 and "unknown partition state" in err
    code, out, _ = cli(capsys, "runs", "skip", run_id, "--partition", BAD, "--reason", "dropped upstream", "--by", "ana")
    assert code == 0 and "skipped by ana; run is partial" in out
    code, out, _ = cli(capsys, "runs", "skip", run_id, "--partition", SLOW, "--reason", "redone", "--by", "ana")
    assert code == 0 and "run is succeeded" in out
    code, out, err = cli(capsys, "runs", "skip", run_id, "--partition", SLOW, "--reason", "again")
    assert code == 1 and "E_SKIP_NOT_ALLOWED" in err


def test_rest_api_lists_partitions_with_read_scope_and_skips_with_write(partial_run, pg_url, tmp_path, monkeypatch,
                                                                        capsys):
    _api, _eng, run_id = partial_run
    live = LiveServer(pg_url, results_dir=tmp_path / "results")
    try:
        read = live.call(create_token, PROJECT, "reader", ["automation:read"], timedelta(days=1), None).token
        write = live.call(create_token, PROJECT, "oncall", ["automation:write"], timedelta(days=1), None).token
        # the CLI against the API prints what it prints against the database
        monkeypatch.setenv("A44_DATABASE_URL", pg_url)
        local = cli(capsys, "partitions", run_id, "--format", "json")
        monkeypatch.delenv("A44_DATABASE_URL")
        monkeypatch.setenv("A44_API_TOKEN", read)
        monkeypatch.setenv("A44_HOME", str(tmp_path / "home"))
        remote = cli(capsys, "partitions", run_id, "--format", "json", "--api-url", live.url)
        assert remote[0] == local[0] == 0 and remote[1] == local[1]
        monkeypatch.delenv("A44_API_TOKEN")
        status, doc, _ = request(live.port, "GET", f"/v1/automation/partitions/{run_id}?state=timeout", b"",
                                 bearer(read))
        assert status == 200 and [p["partition"] for p in doc["partitions"]] == [SLOW]
        status, doc, _ = request(live.port, "GET", "/v1/automation/partitions/wf_daily_load?partition=" + BAD, b"",
                                 bearer(read))
        assert status == 200 and doc["partitions"][0]["run_id"] == run_id
        body = json.dumps({"partition": BAD, "reason": "dropped upstream"}).encode()
        assert request(live.port, "POST", f"/v1/automation/runs/{run_id}/skip", body,
                       bearer(read))[0] == 403
        status, doc, _ = request(live.port, "POST", f"/v1/automation/runs/{run_id}/skip", body,
                                 bearer(write))
        assert status == 200 and doc["skipped_by"] == "token:oncall" and doc["state"] == "partial"
        status, doc, _ = request(live.port, "POST", f"/v1/automation/runs/{run_id}/skip", body,
                                 bearer(write))
        assert status == 409 and doc["error"]["code"] == "E_SKIP_NOT_ALLOWED"
    finally:
        live.close()
