"""`kill -9` of a real `a44 automation serve` while group commits are in flight (engine/committer.py): every run
is left consistent, and another daemon completes them all. The far side is a loopback HTTP server counting calls
per idempotency key ({run_id}:{step_id}); PostgreSQL counts the calls of the commit functions (track_functions)."""

import asyncio
from pathlib import Path

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.store.core import Store
from tests.runtime.daemon_support import FarSide, ServeProcess, call, wait_until
from tests.runtime.engine_support import workflow
from tests.runtime.pg import query

N = 60
STEPS = ("s1", "s2", "s3")


async def _setup(url: str, ir, home: Path) -> list[str]:
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.ensure_partitions()
        await store.publish_version("pj_default", ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        return [(await store.create_run("pj_default", ir.workflow_id, {}, f"k{i}")).run_id for i in range(N)]
    finally:
        await store.close()


def _attempts(url: str, run_ids) -> list:
    return query(url, "select run_id, step_id, status, result, result_ref from automation.step_attempts "
                      "where run_id = any($1) and kind = 'action'", list(run_ids))


def _states(url: str, run_ids) -> dict[str, str]:
    return {r["run_id"]: r["state"] for r in
            query(url, "select run_id, state from automation.runs where run_id = any($1)", list(run_ids))}


def _consistent(url: str, far: FarSide, run_ids) -> list:
    """What the durability contract says of any instant, a crash included."""
    rows = _attempts(url, run_ids)
    recorded = {(r["run_id"], r["step_id"]) for r in rows}
    effects = {tuple(key.split(":")) for (_, key), n in list(far.hits.items()) if n}
    # no effect without a committed running attempt: the attempt row commits before the call goes out
    assert effects <= recorded, sorted(effects - recorded)[:5]
    # no step counted done without its result
    assert all(r["result"] is not None or r["result_ref"] is not None for r in rows if r["status"] == "succeeded")
    done = {(r["run_id"], r["step_id"]) for r in rows if r["status"] == "succeeded"}
    for run_id, step in recorded:            # a step starts only once its predecessor's result is committed
        i = STEPS.index(step)
        assert i == 0 or (run_id, STEPS[i - 1]) in done, (run_id, step)
    for run_id, state in _states(url, run_ids).items():
        if state == "succeeded":
            assert all((run_id, s) in done for s in STEPS), run_id
    return rows


def _backends(url: str) -> int:
    return query(url, "select count(*) as n from pg_stat_activity where datname = current_database() "
                      "and pid <> pg_backend_pid()")[0]["n"]


def _calls(url: str) -> dict[str, int]:
    # the daemon calls the _v2 functions (migration 0045); the counts are kept under their unversioned names
    return {r["funcname"].removesuffix("_v2"): r["calls"] for r in query(
        url, "select funcname, calls from pg_stat_user_functions where schemaname = 'automation' "
             "and funcname in ('engine_commit_v2', 'engine_commit_many_v2')")}


def test_kill_9_with_group_commits_in_flight_leaves_every_run_consistent(pg_url, tmp_path):
    query(pg_url, "do $$ begin execute format('alter database %I set track_functions = ''pl''', "
                  "current_database()); end $$")
    far = FarSide(hold_s=0.3)
    ir = workflow([call("s1", "http", {"method": "POST", "url": far.url("/ok/s1")}),
                   call("s2", "http", {"method": "POST", "url": far.url("/hold/s2")}),
                   call("s3", "http", {"method": "POST", "url": far.url("/hold/s3")})], name="gc-crash")
    run_ids = asyncio.run(_setup(pg_url, ir, tmp_path))
    first = ServeProcess(pg_url, tmp_path, worker_id="first", extra=["--concurrency", str(N)])
    second = None
    try:
        # runs at every stage: some finished s2 and are held in s3 (their commits grouped), others still in s1 / s2;
        # s3 holds too, so the kill lands before every run ended even on an idle machine
        wait_until(lambda: far.count("/hold/s3") >= 5, 60, "runs past their second step")
        first.kill9()
        wait_until(lambda: _backends(pg_url) == 0, 30, "the killed daemon's backends to exit (and flush stats)")
        _consistent(pg_url, far, run_ids)
        calls = _calls(pg_url)
        # the daemon grouped transitions: engine_commit runs once per transition, inside engine_commit_many
        assert calls.get("engine_commit_many", 0) >= 1 and calls["engine_commit"] > calls["engine_commit_many"], \
            calls
        assert set(_states(pg_url, run_ids).values()) != {"succeeded"}, "the kill came after every run ended"

        second = ServeProcess(pg_url, tmp_path, worker_id="second", extra=["--concurrency", str(N)])
        wait_until(lambda: set(_states(pg_url, run_ids).values()) == {"succeeded"}, 90,
                   "every run to complete on the second daemon", interval=0.3)
    finally:
        for p in (first, second):
            if p is not None:
                p.stop()
        far.close()
    rows = _consistent(pg_url, far, run_ids)
    succeeded = [(r["run_id"], r["step_id"]) for r in rows if r["status"] == "succeeded"]
    assert sorted(succeeded) == sorted((r, s) for r in run_ids for s in STEPS)    # each step done exactly once
    calls_per_key = {key: n for (_, key), n in far.hits.items()}
    assert set(calls_per_key) == {f"{r}:{s}" for r in run_ids for s in STEPS}
    assert max(calls_per_key.values()) <= 2           # only a call in flight at the kill went out twice
