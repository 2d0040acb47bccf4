"""examples/daily_partitions.py, the code twin of the seed article's scenario, as a user runs it: the real `a44` CLI
publishes the Python file, one `a44 automation serve` daemon runs it, the export API on 127.0.0.1 counts calls.
30 days, 2 fail (2026-07-04 answers 422 for good, 2026-07-19 hangs past the timeout): the run ends `partial`
listing both; `replay --failed-partitions` calls exactly those two again."""

from __future__ import annotations

import json

from tests.e2e.support import EXAMPLES, e2e_env
from tests.e2e.test_daily_partitions import BAD, DAYS, SLOW, _json, a44, rerun_failed
from tests.partitions.support import ThreadedDailyApi
from tests.runtime.daemon_support import ServeProcess


def test_code_twin_partial_then_rerun_of_exactly_the_failed_days(pg_url, tmp_path):
    api = ThreadedDailyApi()
    api.reject, api.hang = {BAD}, {SLOW}
    env = e2e_env(tmp_path, database_url=pg_url, plugin=False)
    daemon = ServeProcess(pg_url, tmp_path, worker_id="d1")
    try:
        published = a44("publish", str(EXAMPLES / "daily_partitions.py"), env=env)
        assert published.returncode == 0, published.stdout + published.stderr
        inp = json.dumps({"baseUrl": api.url, "from": DAYS[0], "to": DAYS[-1]})
        ran = a44("run", "daily-partitions-code", "--input", inp, "-k", "daily-code-2026-07", "--wait",
                  "--timeout", "60s", env=env)
        assert ran.returncode == 1 and " partial" in ran.stdout, ran.stdout + ran.stderr
        run_id = ran.stdout.split()[0]
        assert f"load-day[{BAD}] (E_UPSTREAM_422)" in ran.stdout and f"load-day[{SLOW}] (E_STEP_TIMEOUT)" in ran.stdout
        assert api.calls[BAD] == 1 and api.calls[SLOW] == 2
        assert all(api.calls[d] == 1 for d in DAYS if d not in (BAD, SLOW))
        assert all(keys == {f"{run_id}:load-day:{d}"} for d, keys in api.keys.items())

        assert rerun_failed(api, run_id, env) == {BAD: 1, SLOW: 1}   # exactly the two failed days again
        run = _json(a44("logs", run_id, "--format", "json", env=env))["run"]
        assert (run["state"], run["epoch"]) == ("partial", 1)
    finally:
        daemon.stop()
        api.close()
