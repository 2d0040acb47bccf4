"""`replay --failed-partitions` over REST (`POST /v1/automation/replay`), dry run and real, on a live server: the
same plan the CLI prints against the database, then a new epoch of the partial run."""

from __future__ import annotations

import json
from datetime import timedelta

from anthares44.automation.runtime.ingestion.tokens import create_token
from tests.cli_support import run_cli
from tests.ingestion.support import LiveServer, bearer, request
from tests.runtime.engine_support import PROJECT


def test_rerun_the_failed_partitions_over_rest(partial_run, pg_url, tmp_path, monkeypatch, capsys):
    _api, _eng, run_id = partial_run
    live = LiveServer(pg_url, results_dir=tmp_path / "results")
    try:
        write = live.call(create_token, PROJECT, "oncall", ["automation:write"], timedelta(days=1), None).token
        body = {"run_ids": [run_id], "failed_partitions": True, "dry_run": True}
        status, plan, _ = request(live.port, "POST", "/v1/automation/replay", json.dumps(body).encode(),
                                  bearer(write))
        assert status == 200 and plan["matched"] == 1, plan
        monkeypatch.setenv("A44_DATABASE_URL", pg_url)
        code, out, err = run_cli(capsys, "automation", "replay", run_id, "--failed-partitions", "--dry-run",
                                 "--project", PROJECT)
        assert code == 0 and json.loads(out) == plan, err
        status, done, _ = request(live.port, "POST", "/v1/automation/replay",
                                  json.dumps({**body, "dry_run": False}).encode(), bearer(write))
        assert status == 200 and done["replayed"] == 1 and done["runs"] == [run_id], done
        status, run, _ = request(live.port, "GET", f"/v1/automation/runs/{run_id}", b"", bearer(write))
        assert run["state"] == "pending" and run["epoch"] == 1, run
    finally:
        live.close()
