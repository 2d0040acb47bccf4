"""The issue 25 scenario end to end: a real `a44 automation serve` (A44_ALERT_INTERVAL=1s, built-in alerts routed
with the CLI to a webhook channel) runs 10 day-partitions against a loopback export API; three days fail for good
(a 422, a timeout, one with no rows caught by `expect:`), the run ends `partial`, and the daemon's own delivery
worker sends ONE signed message to a loopback receiver: the partial run's incident, naming run_partial and
expectation_failed, with the failed days, their codes and `replay RUN --failed-partitions`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time

from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.notify import channels
from anthares44.automation.runtime.store.core import Store
from tests.alerts.test_operator_alerts import BAD, EMPTY, SLOW, YAML
from tests.notify.conftest import SECRET
from tests.notify.receivers import HttpReceiver
from tests.partitions.support import ThreadedDailyApi, compile_yaml, publish
from tests.runtime.daemon_support import A44, ServeProcess, wait_until
from tests.runtime.engine_support import PROJECT


def test_a_partial_run_reaches_a_person_once_from_a_real_daemon(pg_url, tmp_path, monkeypatch):
    api, hook = ThreadedDailyApi(), HttpReceiver(secret=SECRET)
    api.reject, api.empty, api.hang = {BAD}, {EMPTY}, {SLOW}
    ir = compile_yaml(tmp_path, YAML.format(base=api.url, on_failure="partial"))

    async def setup():
        store = await Store.connect(pg_url, clock=SystemClock(), results_dir=tmp_path / "results")
        try:
            await publish(store, ir)
            await channels.create(store, PROJECT, "squad-billing", "webhook",
                                  {"url": hook.hook, "secretRef": "sec_hook"})
            return (await store.create_run(PROJECT, ir.workflow_id, {"from": "2026-07-01", "to": "2026-07-10"},
                                           "july")).run_id
        finally:
            await store.close()

    run_id = asyncio.run(setup())
    env = {**os.environ, "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path)}
    routed = subprocess.run([A44, "monitor", "alert", "builtin", "--notify", "squad-billing"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert routed.returncode == 0, routed.stderr
    monkeypatch.setenv("A44_ALERT_INTERVAL", "1s")
    monkeypatch.setenv("A44_SECRET_SEC_HOOK", SECRET)
    daemon = ServeProcess(pg_url, tmp_path, worker_id="d1")
    try:
        wait_until(lambda: hook.requests, 60, "the alert to reach the receiver")
        time.sleep(3)                           # three more evaluator rounds: nothing else may arrive
        assert daemon.proc.poll() is None, daemon.output()[-2000:]
    finally:
        daemon.stop()
        api.close()
        hook.close()
    [req] = hook.requests                       # one message: no second one for the expectation rule
    assert req["verified"]
    msg = json.loads(req["body"])
    p = msg["payload"]
    assert (msg["kind"], p["run_id"], p["rules"]) == ("firing", run_id, ["builtin:run_partial",
                                                                         "builtin:expectation_failed"])
    assert [(f["partition"], f["error_code"]) for f in p["failed_partitions"]] == [
        (BAD, "E_UPSTREAM_422"), (EMPTY, "E_EXPECTATION_FAILED"), (SLOW, "E_STEP_TIMEOUT")]
    assert p["next_action"] == f"a44 automation replay {run_id} --failed-partitions --project {PROJECT}"
