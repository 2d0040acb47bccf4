"""An evaluator killed with -9 in the middle of a round (a subprocess turning 400 failed runs into one alert), then
another daemon's evaluator taking over when the lease expires: automation.notifications ends with exactly the
firing message and one update every 7 failures, each once (the state change, the run outcome's dedup row and the
message commit together; a retried decision has the same idempotency key)."""

from __future__ import annotations

import subprocess
import sys
import time

from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.alerts import rules as rule_store
from anthares44.automation.runtime.alerts.evaluator import Evaluator
from anthares44.automation.runtime.store.core import Store
from tests.runtime.engine_support import PROJECT, node, publish_and_run, workflow
from tests.runtime.pg import query

FAILURES, EVERY = 400, 7
DOOMED = """
import asyncio, sys
from anthares44.automation.runtime.store.core import Store
from anthares44.automation.runtime.alerts.evaluator import Evaluator

async def main(url):
    store = await Store.connect(url)
    await Evaluator(store, holder="doomed", interval_s=1).step()
    print("finished", flush=True)

asyncio.run(main(sys.argv[1]))
"""


def _count(pg_url) -> int:
    return query(pg_url, "select count(*) from automation.alert_seen")[0][0]


def test_a_round_killed_midway_loses_and_doubles_nothing(store, aio, pg_url, tmp_path):
    aio(store.fetchval("alert_channel_upsert", project=PROJECT, name="squad-billing", kind="slack",
                       config='{"url": "http://127.0.0.1:9/"}', now=store.clock.now()))
    aio(rule_store.upsert_builtin(store, PROJECT, notify="squad-billing", escalate_to=None, severity="p2",
                                  window_s=3600, update_every=EVERY))
    aio(publish_and_run(store, workflow([node("settle")], name="bulk"), key="seed"))
    query(pg_url, "insert into automation.runs (run_id, project_id, workflow_id, version, state, idempotency_key, "
                  "deadline_at, created_at, updated_at, failed_step, error_code, error_message, partition_key) "
                  "select 'run_' || lpad(i::text, 26, '0'), $1, 'wf_bulk', 1, 'failed', 'k' || i, "
                  "now() + interval '1 day', now(), now(), 'settle', 'E_UPSTREAM_400', 'the far side answered 400',"
                  " 'inv-' || i from generate_series(1, $2::int) i", PROJECT, FAILURES)
    query(pg_url, "insert into automation.run_events (run_id, project_id, at, kind, state, step_id, error_code, "
                  "message) select run_id, project_id, now(), 'run.state', 'failed', 'settle', error_code, "
                  "error_message from automation.runs where state = 'failed' order by run_id")

    doomed = subprocess.Popen([sys.executable, "-c", DOOMED, pg_url], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _count(pg_url) < FAILURES // 8 and time.monotonic() < deadline and doomed.poll() is None:
        time.sleep(0.005)
    doomed.kill()
    doomed.wait(10)
    seen = _count(pg_url)
    assert 0 < seen < FAILURES, f"the kill was meant to land mid-round ({seen} of {FAILURES} seen)"

    async def heir():
        s = await Store.connect(pg_url, clock=SystemClock(), results_dir=tmp_path / "r")
        try:
            ev = Evaluator(s, holder="heir", interval_s=1)
            while not await ev.step():          # the doomed one's lease (3 intervals) has to expire
                await __import__("asyncio").sleep(0.2)
        finally:
            await s.close()
    aio(heir())

    rows = query(pg_url, "select kind, channel, (payload->>'count')::int, idempotency_key "
                         "from automation.notifications order by id")
    assert [(r[0], r[1], r[2]) for r in rows] == [("firing", "squad-billing", 1)] + [
        ("update", "squad-billing", c) for c in range(1 + EVERY, FAILURES + 1, EVERY)]
    assert len({r[3] for r in rows}) == len(rows)
    assert query(pg_url, "select machine->>'count' from automation.alerts") == [(str(FAILURES),)]
