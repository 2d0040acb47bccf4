"""Runs never wait for a daemon in silence (runtime/engine/heartbeat.py): daemons beat in `automation.daemons`,
and `run` / `runs` say on stderr when none serves the database. A real `serve` process: while it runs nobody is
warned; after a clean stop, and for a daemon killed -9 once it has not been seen for LIVE_WITHIN, the warning
names the last worker and the command to run."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from anthares44.automation.runtime.engine.heartbeat import LIVE_WITHIN, beat, presence, stopped
from tests.runtime.daemon_support import ServeProcess, wait_until
from tests.runtime.pg import query
from tests.runtime.test_api import write_workflow

A44 = str(Path(sys.executable).parent / "a44")


def test_presence_follows_beats_stops_and_silence(store, aio, clock):
    p = aio(presence(store))
    assert (p.live, p.last) == (0, None)
    assert p.warning() == ("no daemon has ever served this database: runs wait in `pending` until "
                           "`a44 automation serve` runs")
    aio(beat(store, "w1", 3, clock.now()))
    assert aio(presence(store)).live == 1 and aio(presence(store)).warning() is None
    clock.advance(LIVE_WITHIN + timedelta(seconds=1))                  # killed -9: it just stops beating
    p = aio(presence(store))
    assert p.live == 0 and p.warning().startswith("no daemon is serving this database (worker w1 last seen 31s ago)")
    aio(beat(store, "w1", 0, clock.now()))                             # back
    aio(beat(store, "w2", 0, clock.now()))
    assert aio(presence(store)).live == 2
    aio(stopped(store, "w1", clock.now()))
    clock.advance(timedelta(seconds=1))
    aio(stopped(store, "w2", clock.now()))
    clock.advance(timedelta(minutes=12))
    assert "(worker w2 stopped 12m ago)" in aio(presence(store)).warning()
    clock.advance(timedelta(hours=3))
    assert "(worker w2 stopped 3h ago)" in aio(presence(store)).warning()
    clock.advance(timedelta(days=2))
    assert "(worker w2 stopped 2d ago)" in aio(presence(store)).warning()


def test_run_and_runs_warn_when_no_daemon_serves(pg_url, tmp_path):
    env = {**os.environ, "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path)}
    env.pop("A44_API_URL", None)

    def a44(*args):
        return subprocess.run([A44, "automation", *args], capture_output=True, text=True, env=env, timeout=60)

    assert a44("publish", write_workflow(tmp_path / "wf")).returncode == 0
    created = a44("run", "wf_demo_pass", "-i", "{\"customer\": \"c1\"}", "-k", "k1")
    assert created.returncode == 0 and created.stdout.endswith("created\n")
    assert "a44: warning: no daemon has ever served this database" in created.stderr
    assert "a44: warning: no daemon" in a44("runs").stderr                 # a pending run is listed

    daemon = ServeProcess(pg_url, tmp_path, worker_id="beating", lease="30s")
    try:
        wait_until(lambda: query(pg_url, "select count(*) from automation.runs where state = 'succeeded'")[0][0] == 1,
                   30, "the daemon to run it")
        second = a44("run", "wf_demo_pass", "-i", "{\"customer\": \"c1\"}", "-k", "k2")
        assert second.returncode == 0 and "warning" not in second.stderr, second.stderr
        assert daemon.term() == 0
    finally:
        daemon.stop()
    row = query(pg_url, "select worker_id, stopped_at from automation.daemons")[0]
    assert row["worker_id"] == "beating" and row["stopped_at"] is not None
    third = a44("run", "wf_demo_pass", "-i", "{\"customer\": \"c1\"}", "-k", "k3")
    assert "a44: warning: no daemon is serving this database (worker beating stopped" in third.stderr
    assert "until `a44 automation serve` runs" in third.stderr
    finished = a44("runs", "--state", "succeeded")
    assert "warning" not in finished.stderr                                # nothing listed waits for a daemon
