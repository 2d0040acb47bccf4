"""Two daemon releases on one database during a deploy (issue 31, docs/store.md "Rolling upgrades"): the previous
release (tests/rolling/previous_release.py, built from git into a venv of its own) migrates an empty database to
its schema and serves it; runs are created through it, then today's daemon starts beside it and applies today's
migrations while the old one keeps claiming and committing, more runs are created through today's package, and
each daemon is stopped and started again. The old daemon thus runs against a newer schema, which is what the
convention (tests/test_migration_convention.py) must keep safe: every run succeeds, none is lost, each effect
(a loopback HTTP call per step, counted by its Idempotency-Key) happens once, and the old daemon did commit work
after the new schema was in place (else a broken old daemon would hide behind the new one).

A release restarted against a schema it does not accept must refuse with a clear error (E_DB_SCHEMA*), never
serve wrongly: releases before schema 44 refuse any newer schema at start; from 44 on they serve newer additive
ones (tests/runtime/test_schema_range.py)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.store.core import Store
from anthares44.automation.testkit.databases import admin, with_database
from tests.rolling import previous_release
from tests.runtime.daemon_support import FarSide, ServeProcess, call, wait_until
from tests.runtime.engine_support import PROJECT, node, workflow
from tests.runtime.pg import query

SLOW = os.environ.get("A44_SLOW") == "1"
RUNS = 5000 if SLOW else 500
OLD_WORK_AFTER_MIGRATION = 20      # attempts the old daemon starts once today's schema is in place, at least
pytestmark = pytest.mark.timeout(1800 if SLOW else 300)

# run by the previous release's interpreter: publish the workflow, create runs [first, last) through its own Store
OLD_CLIENT = """
import asyncio, json, sys
from pathlib import Path
from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.store.core import Store

async def main(url, ir_file, first, last):
    ir = json.loads(Path(ir_file).read_text())
    store = await Store.connect(url, clock=SystemClock(), results_dir=Path(ir_file).parent / "results")
    try:
        await store.publish_version("pj_default", ir["workflow_id"], ir["version"], ir["sha256"], ir)
        for i in range(first, last):
            await store.create_run("pj_default", ir["workflow_id"], {"n": i}, f"roll-{i}")
    finally:
        await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


@pytest.fixture(scope="session")
def old_a44() -> Path:
    """The previous release's `a44`, built once (kept across sessions: previous_release.cache_dir())."""
    why = previous_release.available()
    if why:
        pytest.skip(why)
    return previous_release.build(previous_release.cache_dir())


@pytest.fixture
def empty_url(a44_postgres):
    """A database with no schema at all: the previous release migrates it."""
    name = f"a44_roll_{secrets.token_hex(6)}"
    admin(a44_postgres.admin_url, f"create database {name}", f"revoke connect, temporary on database {name} from public")
    url = with_database(a44_postgres.admin_url, name)
    yield url
    a44_postgres.drop(url)


def _env(url: str, home: Path) -> dict:
    return {**os.environ, "A44_DATABASE_URL": url, "A44_HOME": str(home)}


def _states(url: str) -> dict[str, int]:
    return {r["state"]: r["n"] for r in query(url, "select state, count(*) as n from automation.runs group by state")}


def _old_work_after(url: str, migrated_at) -> int:
    return query(url, "select count(*) as n from automation.step_attempts where worker_id like 'old-%' "
                      "and started_at > $1", migrated_at)[0]["n"]


async def _create(url: str, home: Path, wf: str, first: int, last: int) -> None:
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        for i in range(first, last):
            await store.create_run(PROJECT, wf, {"n": i}, f"roll-{i}")
    finally:
        await store.close()


def _serving(d: ServeProcess, worker: str) -> bool:
    return f"serving worker={worker}" in d.output() or d.proc.poll() is not None


def test_the_previous_release_and_todays_daemon_serve_one_database_under_load(old_a44, empty_url, tmp_path):
    url, home = empty_url, tmp_path
    far = FarSide()
    wf = workflow([call("a", "http", {"method": "POST", "url": far.url("/ok/a")}),
                   node("nap", sleep_ms=300), call("b", "http", {"method": "POST", "url": far.url("/ok/b")}),
                   node("done", uses="pass", params={})], name="rolling")
    ir_file = home / "ir.json"
    ir_file.write_text(json.dumps(to_json(wf)))
    migrated = subprocess.run([str(old_a44), "automation", "db", "migrate"], env=_env(url, home),
                              capture_output=True, text=True, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    assert query(url, "select max(number) as n from automation.schema_migrations")[0]["n"] == previous_release.SCHEMA
    old_python = str(old_a44.parent / "python")
    daemons = [ServeProcess(url, home, worker_id="old-1", lease="2s", a44=str(old_a44))]
    try:
        wait_until(lambda: _serving(daemons[0], "old-1"), 60, "the previous release to serve")
        half = RUNS // 2
        client = subprocess.Popen([old_python, "-c", OLD_CLIENT, url, str(ir_file), "0", str(half)],
                                  env=_env(url, home), stderr=subprocess.PIPE, text=True, cwd=home)
        wait_until(lambda: _states(url), 60, "the first runs through the previous release")
        daemons.append(ServeProcess(url, home, worker_id="new-1", lease="2s"))      # applies today's migrations
        wait_until(lambda: _serving(daemons[1], "new-1"), 60, "today's daemon to serve")
        assert daemons[1].proc.poll() is None, daemons[1].output()
        migrated_at = query(url, "select max(applied_at) as t from automation.schema_migrations")[0]["t"]
        asyncio.run(_create(url, home, wf.workflow_id, half, RUNS))
        assert client.wait(120) == 0, client.stderr.read() if client.stderr else ""
        wait_until(lambda: _old_work_after(url, migrated_at) >= OLD_WORK_AFTER_MIGRATION, 120,
                   "the previous release to keep working on today's schema")
        assert daemons[1].term() == 0, daemons[1].output()                           # today's daemon restarts
        daemons.append(ServeProcess(url, home, worker_id="new-2", lease="2s"))
        wait_until(lambda: _serving(daemons[2], "new-2"), 60, "today's daemon to serve again")
        assert daemons[0].term() == 0, daemons[0].output()                           # the old one too
        daemons.append(ServeProcess(url, home, worker_id="old-2", lease="2s", a44=str(old_a44)))
        wait_until(lambda: _serving(daemons[3], "old-2"), 60, "the previous release to serve or refuse")
        old_restart = daemons[3].proc.poll()
        if old_restart is not None:      # it may refuse the newer schema: with a clear error, never a traceback
            out = daemons[3].output()
            assert old_restart == 1 and "E_DB_SCHEMA" in out and "Traceback" not in out, out
        wait_until(lambda: _states(url).get("succeeded", 0) == RUNS or not set(_states(url)) <= {
            "succeeded", "pending", "running", "sleeping", "queued", "waiting"}, 600 if SLOW else 180,
                   "every run to succeed")
    finally:
        for d in daemons:
            d.stop()
        far.close()
    assert _states(url) == {"succeeded": RUNS}                         # 0 failed, 0 lost
    keys = {key for (_, key) in far.hits}
    ids = [r["run_id"] for r in query(url, "select run_id from automation.runs")]
    assert keys == {f"{run}:{step}" for run in ids for step in ("a", "b")}
    assert set(far.hits.values()) == {1}                                  # each effect once
    for d in daemons[:3]:
        out = d.log.read_text()
        assert "Traceback" not in out and "E_DB" not in out, out[-3000:]
    by_worker = {r["w"]: r["n"] for r in query(url, "select split_part(worker_id, '-', 1) as w, count(*) as n "
                                                    "from automation.step_attempts group by 1")}
    assert by_worker.get("new", 0) > 0 and by_worker.get("old", 0) > 0, by_worker
    print(f"\nrolling upgrade: {RUNS} runs, previous release {previous_release.COMMIT[:12]} (schema "
          f"{previous_release.SCHEMA}) beside today's; attempts by old/new: {by_worker}; old restart "
          f"{'refused (E_DB_SCHEMA)' if old_restart is not None else 'served'}")
