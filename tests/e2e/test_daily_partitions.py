"""examples/daily-partitions.yaml, the seed article's scenario, as a user runs it: the real `a44` CLI and one
`a44 automation serve` daemon (subprocesses) on the test database, the export API on 127.0.0.1 counting calls.
30 daily partitions, 2 fail (2026-07-04 answers 422 for good, 2026-07-19 hangs past the timeout): the run ends
`partial` listing both; `replay --failed-partitions` calls exactly those two again (the timeout is fixed, the
422 is not); a person skips the 422 day and the run is `succeeded`."""

from __future__ import annotations

import json
import time

from tests.e2e.support import EXAMPLES, e2e_env
from tests.e2e.support import a44 as _a44
from tests.partitions.support import ThreadedDailyApi
from tests.runtime.daemon_support import ServeProcess, wait_until

BAD, SLOW = "2026-07-04", "2026-07-19"
DAYS = [f"2026-07-{d:02d}" for d in range(1, 31)]


def a44(*args, env):
    return _a44("automation", *args, env=env)


def _json(proc):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def rerun_failed(api, run_id: str, env) -> dict[str, int]:
    """Fix the slow export (the 422 day stays broken), `replay RUN --failed-partitions`, wait for the run to end
    partial again; the calls each day got from the rerun."""
    api.hang = set()
    before = dict(api.calls)
    assert a44("replay", run_id, "--failed-partitions", env=env).returncode == 0
    wait_until(lambda: _json(a44("runs", "--state", "partial", "--format", "json", env=env))["total"] == 1
               and api.calls[SLOW] > before[SLOW], 60, "the rerun to end partial again")
    time.sleep(0.5)
    return {d: api.calls[d] - before.get(d, 0) for d in DAYS if api.calls[d] != before.get(d, 0)}


def test_daily_partitions_partial_rerun_and_skip(pg_url, tmp_path):
    api = ThreadedDailyApi()
    api.reject, api.hang = {BAD}, {SLOW}
    env = e2e_env(tmp_path, database_url=pg_url, plugin=False)
    daemon = ServeProcess(pg_url, tmp_path, worker_id="d1")
    try:
        assert a44("publish", str(EXAMPLES / "daily-partitions.yaml"), env=env).returncode == 0
        inp = json.dumps({"baseUrl": api.url, "from": DAYS[0], "to": DAYS[-1]})
        ran = a44("run", "daily-partitions", "--input", inp, "-k", "daily-2026-07", "--wait", "--timeout", "60s",
                  env=env)
        assert ran.returncode == 1 and " partial" in ran.stdout, ran.stdout + ran.stderr
        run_id = ran.stdout.split()[0]
        assert f"load-day[{BAD}] (E_UPSTREAM_422)" in ran.stdout and f"load-day[{SLOW}] (E_STEP_TIMEOUT)" in ran.stdout
        doc = _json(a44("partitions", run_id, "--format", "json", env=env))
        assert doc["counts"] == {"success": 28, "failed": 1, "timeout": 1}
        assert [p["partition"] for p in doc["partitions"]] == DAYS
        assert api.calls[BAD] == 1 and api.calls[SLOW] == 2 and all(api.calls[d] == 1 for d in DAYS
                                                                   if d not in (BAD, SLOW))
        listed = _json(a44("runs", "--state", "partial", "--format", "json", env=env))
        assert [r["run_id"] for r in listed["runs"]] == [run_id]

        assert rerun_failed(api, run_id, env) == {BAD: 1, SLOW: 1}   # exactly the two failed partitions again
        doc = _json(a44("partitions", run_id, "--format", "json", env=env))
        assert doc["counts"] == {"success": 29, "failed": 1}

        skipped = a44("runs", "skip", run_id, "--partition", BAD, "--reason", "the source dropped that day",
                      "--by", "ana", env=env)
        assert skipped.returncode == 0 and "run is succeeded" in skipped.stdout, skipped.stdout + skipped.stderr
        run = _json(a44("logs", run_id, "--format", "json", env=env))
        assert run["run"]["state"] == "succeeded" and run["run"]["epoch"] == 1
        (row,) = _json(a44("partitions", "daily-partitions", "--partition", BAD, "--format", "json",
                           env=env))["partitions"]
        assert (row["state"], row["skipped_by"], row["skip_reason"]) == ("skipped", "ana",
                                                                          "the source dropped that day")
    finally:
        daemon.stop()
        api.close()
