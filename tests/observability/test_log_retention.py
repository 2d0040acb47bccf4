"""Log retention on a real PostgreSQL with attempts spread over months (ManualClock): days older than the hot
retention go to Parquet, fully archived months are dropped as partitions, `--archive` answers exactly what the hot
query answered before; runs go only once their attempts' month is gone, with their events and trace context;
archive days older than the cold retention are deleted; one process at a time (advisory lock); a `logs archive`
killed with SIGKILL mid-way loses and doubles nothing; without pyarrow, one coded error and no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta

from anthares44.automation.app.automation import Automation
from anthares44.automation.runtime.logs import archive
from anthares44.automation.runtime.logs.retention import run_retention
from tests import store_queries
from tests.cli.test_runtime_verbs import A44
from tests.runtime.pg import query

from .log_support import P, Row, seed, spread


def everything(auto, aio, *, archive_: bool = False, **filters) -> list[dict]:
    rows, after = [], None
    while True:
        page = aio(auto.query_logs(since=datetime(2020, 1, 1, tzinfo=UTC), until=datetime(2100, 1, 1),
                                   limit=10_000, after=after,
                                   archive=archive_, **filters))
        rows += page.rows
        if not page.truncated:
            return rows
        after = page.next


def months(store, aio) -> set[str]:
    return {p["name"] for p in aio(store.list_partitions())} - {"step_attempts_default"}


def test_old_days_move_to_parquet_months_drop_and_archive_answers_the_same(store, aio, clock, tmp_path):
    old = spread(datetime(2026, 3, 10, 9, tzinfo=UTC), 40, timedelta(hours=23), prefix="run_old_")
    recent = spread(datetime(2026, 3, 12, 7, tzinfo=UTC), 140, timedelta(hours=21, minutes=40))
    aio(seed(store, old + recent))
    root = tmp_path / "archive"
    auto = Automation(store, P, archive_dir=root)
    before = everything(auto, aio)
    before_503 = everything(auto, aio, error_code="E_UPSTREAM_503", step="reserve")
    assert len(before) == 180 and {"step_attempts_y2026m03", "step_attempts_y2026m05"} <= months(store, aio)

    report = aio(run_retention(store, root, hot_days=30))
    cutoff = datetime(2026, 6, 19, tzinfo=UTC)                     # 2026-07-19 - 30 days, day start
    assert report.hot_cutoff == cutoff and not report.skipped
    assert sum(d["rows"] for d in report.archived_days) == len([r for r in before if r["started_at"] < cutoff])
    assert [m["partition"] for m in report.dropped_months] == [f"step_attempts_y2026m0{m}" for m in (3, 4, 5)]
    assert not {"step_attempts_y2026m03", "step_attempts_y2026m04", "step_attempts_y2026m05"} & months(store, aio)
    assert "step_attempts_y2026m06" in months(store, aio)                   # partly hot: kept whole

    hot = everything(auto, aio)
    june = datetime(2026, 6, 1, tzinfo=UTC)
    assert hot == [r for r in before if r["started_at"] >= june]              # the dropped months left PostgreSQL
    cold = everything(auto, aio, archive_=True)
    assert cold == [r for r in before if r["started_at"] < cutoff]           # ... and are in the archive, in order
    assert everything(auto, aio, archive_=True, error_code="E_UPSTREAM_503", step="reserve") == [
        r for r in before_503 if r["started_at"] < cutoff]
    page = aio(auto.query_logs(since=datetime(2026, 3, 1, tzinfo=UTC), archive=True, limit=5,
                               partition_key="acct_0"))
    assert page.truncated and len(page.rows) == 5 and page.source == "archive"
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.parquet"))
    assert files[0] == "attempts/day=2026-03-10/attempts.parquet" and len(files) == len(report.archived_days)

    # the old runs ended before June (the oldest month left): gone with their events and trace context
    assert report.deleted_runs == 5
    left = {r["run_id"] for r in aio(store.fetch("runs_list", project=P, state=None, workflow=None, step=None,
                                                 since=None, limit=100, offset=0))}
    assert left == {f"run_{i:04d}" for i in range(5)}
    conn_rows = aio(store_queries.fetch(store, "logs_archive_days"))
    assert [r["day"] for r in conn_rows] == [date.fromisoformat(d["day"]) for d in report.archived_days]

    again = aio(run_retention(store, root, hot_days=30))                     # nothing new: nothing done
    assert again.archived_days == [] and again.dropped_months == [] and again.deleted_runs == 0

    clock.set(datetime(2027, 8, 20, tzinfo=UTC))                    # 13 months on: the cold days expire
    late = aio(run_retention(store, root, hot_days=30, archive_months=13))
    assert late.deleted_archive_days and min(archive.archived_days(root)) >= date(2026, 7, 1)
    assert all(date.fromisoformat(d) < date(2026, 7, 1) for d in late.deleted_archive_days)
    assert min(r["day"] for r in aio(store_queries.fetch(store, "logs_archive_days"))) >= date(2026, 7, 1)


def test_one_process_at_a_time(store, aio, tmp_path):
    async def held():
        async with store.session("test_hold_retention") as other:
            assert await other.fetchval("logs_retention_try_lock")
            try:
                return await run_retention(store, tmp_path / "archive")
            finally:
                await other.fetchval("logs_retention_unlock")

    assert aio(held()).skipped is True
    assert aio(run_retention(store, tmp_path / "archive")).skipped is False


def test_a_kill_mid_archive_loses_and_doubles_nothing(store, aio, pg_url, tmp_path):
    now = datetime.now(UTC)
    rows = spread(now - timedelta(days=330), 600, timedelta(hours=12), runs=7)    # 300 days, all past 30 days
    rows = [r for r in rows if r.started_at < now - timedelta(days=31)]
    aio(seed(store, rows))
    root = tmp_path / "archive"
    env = {**os.environ, "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path / "home"),
           "A44_LOG_ARCHIVE_DIR": str(root), "A44_PROJECT": P}
    plan = subprocess.run([A44, "automation", "logs", "archive", "--dry-run", "--format", "json"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert planned["dry_run"] and sum(d["rows"] for d in planned["archived_days"]) == len(rows)
    assert query(pg_url, "select count(*) as n from automation.log_archive_days")[0]["n"] == 0   # changed nothing
    proc = subprocess.Popen([A44, "automation", "logs", "archive"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if query(pg_url, "select count(*) as n from automation.log_archive_days")[0]["n"] >= 3:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL, "the archive finished before it could be killed"
    recorded = query(pg_url, "select count(*) as n from automation.log_archive_days")[0]["n"]
    assert 3 <= recorded < 290                                              # killed mid-way

    done = subprocess.run([A44, "automation", "logs", "archive", "--format", "json"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    auto = Automation(store, P, archive_dir=root)
    cold = everything(auto, aio, archive_=True)
    assert [(r["started_at"], r["run_id"], r["step_id"], r["attempt"]) for r in cold] == [
        (r.started_at, r.run_id, r.step_id, r.attempt) for r in sorted(rows, key=Row.key, reverse=True)]
    assert not list(root.rglob("*.tmp"))


def test_without_pyarrow_the_archive_is_one_coded_error(pg_url, tmp_path):
    blocker = tmp_path / "nopyarrow"
    blocker.mkdir()
    (blocker / "pyarrow.py").write_text("raise ImportError('No module named pyarrow')\n")
    env = {**os.environ, "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path / "home"),
           "PYTHONPATH": f"{blocker}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for argv in (["logs", "query", "--archive"], ["logs", "archive", "--dry-run"]):
        r = subprocess.run([sys.executable, "-m", "anthares44.automation.cli.main", "automation", *argv], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and r.stderr.startswith("E_ARCHIVE_UNAVAILABLE "), r.stderr
        assert "[archive]" in r.stderr and "Traceback" not in r.stderr


def test_the_daemon_loop_runs_a_round_and_stops_when_told(store, clock, aio, tmp_path):
    import asyncio

    from anthares44.automation.runtime.logs.retention import retention_loop

    aio(seed(store, spread(datetime(2026, 4, 2, tzinfo=UTC), 20, timedelta(hours=30))))
    root = tmp_path / "archive"

    async def one_round():
        stop = asyncio.Event()
        task = asyncio.create_task(retention_loop(store, root, stop, first_after=60, every=3600))
        for _ in range(500):
            if await store_queries.fetch(store, "logs_archive_days"):
                break
            clock.advance(30)          # the round comes when the store's clock reaches it, not the wall clock
            await asyncio.sleep(0.02)
        stop.set()
        await asyncio.wait_for(task, 10)          # stops at once, not after `every`

    aio(one_round())
    assert "step_attempts_y2026m04" not in months(store, aio)
    assert sum(r["rows"] for r in aio(store_queries.fetch(store, "logs_archive_days"))) == 20
