"""`runs migrate` races (docs/deploys.md "Races"): a run whose row another transaction holds is `busy` and tried
again, one whose lease a worker holds is `held` and never moved under it; a run that advanced after the plan is
judged where it stands when its lock is taken; two migrates at once move each run exactly once; `versioning:
auto-upgrade` moves the compatible runs at publish and leaves the others pinned. Real PostgreSQL, the test kit."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
import pytest

from anthares44.automation.app.run_migration import migrate_runs
from anthares44.automation.testkit import Ok

V1 = """\
name: racy
version: 1
steps:
  - id: a
    uses: connector/acct.work
    timeout: 5s
  - id: w1
    wait: {signal: g1, timeout: 1d, onTimeout: fail}
  - id: b
    uses: connector/acct.work
    timeout: 5s
  - id: w2
    wait: {signal: g2, timeout: 1d, onTimeout: fail}
"""
# v2 inserts `n` between `b` and `w2`: compatible for a run at w1, blocked (no migrate) for one at w2
V2 = V1.replace("version: 1", "version: 2").replace("  - id: w2\n", "  - id: n\n    uses: connector/acct.work\n"
                                                                   "    timeout: 5s\n  - id: w2\n")


def _runs(env, n: int) -> list[str]:
    env.mock("connector/acct.work", Ok({}))
    env.publish(V1)
    ids = [env.run("racy", {"i": i}, idempotency_key=f"r{i}", settle=False).id for i in range(n)]
    env.settle()
    return ids


def _versions(env, ids) -> list[int]:
    return [env.get(r).row["version"] for r in ids]


def _migrate(env, **kw):
    return env.call(migrate_runs(env.store, env.project, "wf_racy", 2, by="t", **kw))


def test_a_run_another_transaction_holds_is_busy_then_moved_once_it_is_free(a44_env):
    env = a44_env
    locked, free = _runs(env, 2)
    env.publish(V2)

    async def hold_row_then_migrate():
        conn = await asyncpg.connect(env.store.url)
        try:
            tx = conn.transaction()
            await tx.start()        # as a worker's commit of this run would
            await conn.execute("select 1 from automation.runs where run_id = $1 for update", locked)
            first = await migrate_runs(env.store, env.project, "wf_racy", 2, by="t", passes=1)
            await tx.rollback()
            second = await migrate_runs(env.store, env.project, "wf_racy", 2, by="t")
            return first, second
        finally:
            await conn.close()

    first, second = env.call(hold_row_then_migrate())
    assert {r.run_id: r.outcome for r in first.results} == {locked: "busy", free: "moved"}
    assert {r.run_id: r.outcome for r in second.results} == {locked: "moved"}
    assert _versions(env, [locked, free]) == [2, 2]


def test_a_busy_run_is_tried_again_in_the_next_pass_of_the_same_migrate(a44_env, monkeypatch):
    """The row is held when the first pass reaches it and released before the second (RETRY_S later): one
    `runs migrate` moves it, its report says `moved`, not `busy`."""
    from anthares44.automation.app import run_migration

    env = a44_env
    locked, free = _runs(env, 2)
    env.publish(V2)
    real, refused = run_migration.move_run, asyncio.Event()

    async def move_run(store, project, run_id, *args, **kw):
        result = await real(store, project, run_id, *args, **kw)
        if run_id == locked and result.outcome == "busy":
            refused.set()
        return result

    monkeypatch.setattr(run_migration, "move_run", move_run)

    async def hold_then_release():
        conn = await asyncpg.connect(env.store.url)
        try:
            tx = conn.transaction()
            await tx.start()
            await conn.execute("select 1 from automation.runs where run_id = $1 for update", locked)
            task = asyncio.ensure_future(migrate_runs(env.store, env.project, "wf_racy", 2, by="t", passes=5))
            await asyncio.wait_for(refused.wait(), 30)      # the first pass found it busy
            await tx.rollback()
            return await asyncio.wait_for(task, 30)
        finally:
            await conn.close()

    report = env.call(hold_then_release())
    assert {r.run_id: r.outcome for r in report.results} == {locked: "moved", free: "moved"}
    assert _versions(env, [locked, free]) == [2, 2]


def test_a_leased_run_stays_on_its_version(a44_env):
    env = a44_env
    (leased,) = _runs(env, 1)
    env.publish(V2)

    async def lease():
        conn = await asyncpg.connect(env.store.url)
        try:
            await conn.execute("update automation.runs set lease_owner = 'w9', lease_deadline = $2 "
                               "where run_id = $1", leased, env.now)
        finally:
            await conn.close()

    env.call(lease())
    report = _migrate(env, passes=2)
    assert [(r.outcome, r.detail) for r in report.results] == [("held", "worker w9 holds the run's lease")]
    assert _versions(env, [leased]) == [1]


def test_a_run_that_advanced_after_the_plan_is_judged_where_it_stands(a44_env):
    from anthares44.automation.app.deploy_plan import plan_workflow
    from anthares44.automation.compiler.ir import load_workflow_ir

    env = a44_env
    stays, moves = _runs(env, 2)
    env.publish(V2)
    v2 = load_workflow_ir(env.call(env.store.get_version(env.project, "wf_racy", 2))["ir"])
    plan = env.call(plan_workflow(env.store, env.project, v2))
    assert {r.stand.run_id: r.outcome for r in plan.runs} == {stays: "compatible", moves: "compatible"}
    env.call(env.app.signal(stays, "g1"))     # it passes `b`: `n` is now before its frontier
    env.settle()
    report = _migrate(env)
    got = {r.run_id: (r.outcome, r.plan.first_difference) for r in report.results}
    assert got == {stays: ("blocked", "n"), moves: ("moved", None)}
    assert _versions(env, [stays, moves]) == [1, 2]


def test_two_migrates_at_once_move_each_run_exactly_once(a44_env):
    env = a44_env
    ids = _runs(env, 40)
    env.publish(V2)

    async def both():
        return await asyncio.gather(*(migrate_runs(env.store, env.project, "wf_racy", 2, by=who)
                                      for who in ("one", "two")))

    one, two = env.call(both())
    outcomes = [r.outcome for r in one.results + two.results]
    assert outcomes.count("moved") == 40 and set(outcomes) <= {"moved", "already"}
    events = [e for r in ids for e in env.call(env.store.list_run_events(r)) if e["kind"] == "run_version_changed"]
    assert len(events) == 40 and len({e["run_id"] for e in events}) == 40
    assert set(_versions(env, ids)) == {2}


@pytest.mark.parametrize("versioning, moved", [("auto-upgrade", 1), ("pin", 0)])
def test_auto_upgrade_moves_the_compatible_runs_at_publish_and_pin_moves_none(a44_env, versioning, moved):
    env = a44_env
    at_w1, at_w2 = _runs(env, 2)
    env.call(env.app.signal(at_w2, "g1"))
    env.settle()
    report = env.publish(V2.replace("version: 2\n", f"version: 2\nversioning: {versioning}\n"))
    assert _versions(env, [at_w1, at_w2]) == ([2, 1] if moved else [1, 1])
    if moved:
        assert report.upgraded == [{"workflow_id": "wf_racy", "to": 2, "counts": {"moved": 1, "blocked": 1}}]
        (event,) = [e for e in env.call(env.store.list_run_events(at_w1)) if e["kind"] == "run_version_changed"]
        assert (event["data"]["by"], event["data"]["reason"]) == ("publish", "versioning: auto-upgrade")
    else:
        assert report.upgraded == []


def test_runs_advancing_while_migrate_runs_end_on_one_version_each_with_no_step_run_twice(a44_env):
    """The engine drives 40 runs past `b` while a migrate to v2 runs beside it: each run is moved while it is still
    at w1 (it then runs `n` on v2) or reaches w2 first (blocked: `n` would precede its frontier, it stays on v1);
    none is moved under a worker, none calls a step twice, and all finish."""
    from collections import Counter

    env = a44_env
    ids = _runs(env, 40)
    env.publish(V2)
    for r in ids:
        env.call(env.app.signal(r, "g1"))        # every run is due: the engine and the migration race for it

    async def drive():
        while sum(len(x) for x in await asyncio.gather(*(w.run_once() for w in env.workers))):
            await asyncio.sleep(0)

    async def race():
        return (await asyncio.gather(drive(), migrate_runs(env.store, env.project, "wf_racy", 2, by="race")))[1]

    report = env.call(race())
    assert len(report.results) == 40
    assert set(r.outcome for r in report.results) <= {"moved", "blocked", "busy", "held"}
    env.settle()
    for r in ids:
        view = env.get(r)
        moved = [e for e in env.call(env.store.list_run_events(r)) if e["kind"] == "run_version_changed"]
        assert len(moved) == (view.row["version"] == 2)
        assert bool(view.attempts("n")) == (view.row["version"] == 2), r
        env.call(env.app.signal(r, "g2"))
    env.settle()
    work = env.registry.mocks["connector/acct.work"]
    assert set(Counter(c.idempotency_key for c in work.calls).values()) == {1}
    assert {env.get(r).row["state"] for r in ids} == {"succeeded"}


def test_an_auto_upgrade_run_a_worker_held_at_publish_moves_when_released_and_a_blocked_one_is_judged_once(a44_env):
    """The publish cannot move a run a worker holds; once that worker releases it, the engine's auto-upgrade sweep
    (runtime/upgrades.py) moves it (by `auto-upgrade`), and it runs v2's new step. A run v2 would block is judged
    once for v2 (`run_version_kept`), not at every sweep."""
    env = a44_env
    held, at_w2 = _runs(env, 2)
    env.call(env.app.signal(at_w2, "g1"))
    env.settle()
    lease = "update automation.runs set lease_owner = $2, lease_deadline = $3 where run_id = $1"
    env.call(env.store.pool.execute(lease, held, "busy-worker", env.now + timedelta(hours=1)))
    report = env.publish(V2.replace("version: 2\n", "version: 2\nversioning: auto-upgrade\n"))
    assert report.upgraded == [{"workflow_id": "wf_racy", "to": 2, "counts": {"held": 1, "blocked": 1}}]
    assert _versions(env, [held, at_w2]) == [1, 1]
    env.call(env.store.pool.execute(lease, held, None, None))      # the worker releases it between steps
    env.advance("10s")
    env.advance("10s")
    assert _versions(env, [held, at_w2]) == [2, 1]
    (event,) = [e for e in env.call(env.store.list_run_events(held)) if e["kind"] == "run_version_changed"]
    assert event["data"]["by"] == "auto-upgrade"
    kept = [e for e in env.call(env.store.list_run_events(at_w2)) if e["kind"] == "run_version_kept"]
    assert [(e["data"]["to"], e["data"]["class"]) for e in kept] == [(2, "blocked")]
    env.call(env.app.signal(held, "g1"))
    env.settle()
    rows = env.call(env.store.pool.fetch("select step_id, status from automation.step_attempts where run_id = $1 "
                                         "and kind = 'action' and step_id not like 'w%' order by started_at", held))
    assert [(r["step_id"], r["status"]) for r in rows] == [("a", "succeeded"), ("b", "succeeded"), ("n", "succeeded")]
