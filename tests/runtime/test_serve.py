"""`a44 automation serve` as a process: SIGTERM lets the in-flight step finish, releases the lease and exits 0;
another daemon then finishes the run. Also: the serve loop wakes on NOTIFY (no polling) for a new run."""

import asyncio
import time

from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.store.core import Store
from tests.runtime.daemon_support import FarSide, ServeProcess, http_sql_workflow, wait_until
from tests.runtime.pg import query
from tests.runtime.test_crash import _setup, _states


def test_sigterm_finishes_the_step_in_flight_releases_and_exits_0(pg_url, app_url, app_dbs, tmp_path):
    far = FarSide(hold_s=1.0)
    ir = http_sql_workflow(far, name="graceful")
    (run_id,) = asyncio.run(_setup(pg_url, ir, 1, tmp_path, app_dbs.url()))
    daemon = ServeProcess(pg_url, tmp_path, worker_id="graceful", lease="30s", extra=["--grace", "10s"],
                          app_url=app_url)
    nxt = None
    try:
        assert far.held.wait(30), daemon.output()
        t0 = time.monotonic()
        assert daemon.term(timeout=15) == 0, daemon.output()
        assert time.monotonic() - t0 < 10, "exited when the step in flight finished, not at its 10 s grace"
        run = query(pg_url, "select state, lease_owner, next_wake_at from automation.runs where run_id = $1",
                    run_id)[0]
        assert run["state"] == "pending" and run["lease_owner"] is None and run["next_wake_at"] is not None
        middle = query(pg_url, "select status from automation.step_attempts where run_id = $1 "
                               "and step_id = 'middle'", run_id)
        assert [r["status"] for r in middle] == ["succeeded"]      # finished and recorded before exiting
        assert "stopped worker=graceful" in daemon.output()
        # another daemon takes over at once (released, not expired: no reclaim) and does not repeat `middle`
        nxt = ServeProcess(pg_url, tmp_path, worker_id="next", lease="30s", app_url=app_url)
        wait_until(lambda: asyncio.run(_states(pg_url, [run_id]))[run_id] == "succeeded", 20, "the run to finish")
        assert far.count("/hold/middle") == 1
        reclaims = query(pg_url, "select lease_reclaims from automation.runs where run_id = $1",
                         run_id)[0]["lease_reclaims"]
        assert reclaims == 0
    finally:
        daemon.stop()
        if nxt is not None:
            nxt.stop()
        far.close()


def test_an_idle_daemon_wakes_on_notify_for_a_new_run(pg_url, app_url, app_dbs, tmp_path):
    far = FarSide()
    ir = http_sql_workflow(far, name="notify", hold=False)
    asyncio.run(_setup(pg_url, ir, 0, tmp_path, app_dbs.url()))
    # The idle daemon's only other wake-up is its missed-NOTIFY re-check, one lease timeout (600 s) of wall time
    # after it went idle: finishing well inside that proves the NOTIFY woke it, without asserting a timing that a
    # loaded machine can miss (the old "< 5 s" failed at load 9).
    daemon = ServeProcess(pg_url, tmp_path, worker_id="idle", lease="600s", app_url=app_url)
    try:
        time.sleep(1.5)                                                        # started and idle

        async def create():
            store = await Store.connect(pg_url, clock=SystemClock(), results_dir=tmp_path / "r")
            try:
                return (await store.create_run("pj_default", ir.workflow_id, {}, "late")).run_id
            finally:
                await store.close()

        run_id = asyncio.run(create())
        wait_until(lambda: asyncio.run(_states(pg_url, [run_id]))[run_id] == "succeeded", 120,
                   "the new run (woken by NOTIFY: the re-check would come only after 600 s)")
    finally:
        daemon.stop()
        far.close()
