"""Issue 31 "done when" (docs/deploys.md): open v3 runs parked at random signal waits; v4 renames a step every run
past the first wait has completed and inserts a step before the frontier of the runs at the third wait. The plan
equals this test's own oracle (computed from where the test parked each run, not from the classifier), exit 3
without `migrate:` and 0 with it; after `runs migrate` no completed step runs again (the mock's calls) and every
run finishes on v4. Real PostgreSQL, the production engine, virtual time (the test kit).

Size: N_RUNS (default 200 for CI); A44_SLOW=1 runs the issue's 1,000.
"""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from anthares44.automation.app.deploy_plan import plan_workflow
from anthares44.automation.app.run_migration import migrate_runs, versions
from anthares44.automation.compiler.ir import load_workflow_ir
from anthares44.automation.testkit import Ok

N_RUNS = int(os.environ.get("A44_RUNS", 1000 if os.environ.get("A44_SLOW") == "1" else 200))

STEPS_V3 = """\
  - id: a
    uses: connector/acct.work
    timeout: 5s
  - id: w1
    wait: {signal: g1, timeout: 30d, onTimeout: fail}
  - id: b
    uses: connector/acct.work
    timeout: 5s
  - id: w2
    wait: {signal: g2, timeout: 30d, onTimeout: fail}
  - id: c
    uses: connector/acct.work
    timeout: 5s
"""
TAIL = """\
  - id: w3
    wait: {signal: g3, timeout: 30d, onTimeout: fail}
  - id: d
    uses: connector/acct.work
    timeout: 5s
"""
V3 = "name: parked\nversion: 3\nmaxDuration: 60d\nsteps:\n" + STEPS_V3 + TAIL
# v4: `b` is `b2` (same content), and `x` is inserted between `c` and `w3`
STEPS_V4 = STEPS_V3.replace("id: b\n", "id: b2\n") + """\
  - id: x
    uses: connector/acct.work
    timeout: 5s
"""
MIGRATE = "migrate:\n  from: [3]\n  rename: {b: b2}\n  addedBeforeFrontier: skip\n"
V4_BARE = "name: parked\nversion: 4\nmaxDuration: 60d\nsteps:\n" + STEPS_V4 + TAIL
V4 = "name: parked\nversion: 4\nmaxDuration: 60d\n" + MIGRATE + "steps:\n" + STEPS_V4 + TAIL


def _oracle(wait: int) -> tuple[str, set[str]]:
    """The class of a run parked at wait `wait` (1, 2, 3) and the steps it will call after the move (v4 ids)."""
    if wait == 1:       # nothing changed at or before w1: b2 and x lie after the frontier
        return "compatible", {"b2", "c", "x", "d"}
    if wait == 2:       # b completed and renamed: mappable by rename only
        return "mappable", {"c", "x", "d"}
    return "mappable", {"d"}     # b renamed, x inserted before w3: skipped, never called


def _park(env, n: int, seed: int = 31) -> dict[str, int]:
    rng = random.Random(seed)
    runs = [env.run("parked", {"i": i}, idempotency_key=f"k{i}", settle=False) for i in range(n)]
    env.settle()
    where = {r.id: rng.choice((1, 2, 3)) for r in runs}
    for k in (1, 2):
        for run_id, w in where.items():
            if w > k:
                env.call(env.app.signal(run_id, f"g{k}"))
        env.settle()
    return where


@pytest.mark.a44_env(start="2027-01-04T09:00:00Z")
def test_plan_equals_the_oracle_and_migrate_never_reruns_a_completed_step(a44_env, tmp_path):
    env = a44_env
    work = env.mock("connector/acct.work", Ok({"done": True}))
    env.publish(V3)
    where = _park(env, N_RUNS)
    rows = {r.id: r for r in env.runs("parked")}
    assert {r.row["state"] for r in rows.values()} == {"waiting"}
    assert Counter(rows[r].row["current_step"] for r in where) == Counter(f"w{w}" for w in where.values())
    calls_before = Counter(c.idempotency_key for c in work.calls)
    assert set(calls_before.values()) == {1}

    def plan(text: str):
        from anthares44.automation.app.deploy_plan import plan_publish

        path = tmp_path / "v4.yaml"
        path.write_text(text)
        return env.call(plan_publish(env.store, env.project, [str(path)], plugins=env.registry.mocked_plugins()))

    bare = plan(V4_BARE).to_dict()
    expected_bare = {rid: "compatible" if w == 1 else "blocked" for rid, w in where.items()}
    got_bare = {r["run_id"]: r["class"] for r in bare["workflows"][0]["runs"]}
    assert got_bare == expected_bare
    assert bare["counts"]["blocked"] == sum(1 for w in where.values() if w > 1) and not bare["ok"]
    firsts = {r["run_id"]: r["first_difference"] for r in bare["workflows"][0]["runs"]}
    assert {firsts[rid] for rid, w in where.items() if w > 1} == {"b"}

    full = plan(V4).to_dict()
    got = {r["run_id"]: r["class"] for r in full["workflows"][0]["runs"]}
    assert got == {rid: _oracle(w)[0] for rid, w in where.items()}
    assert full["counts"]["blocked"] == 0 and full["ok"]
    x_before = {r["run_id"] for r in full["workflows"][0]["runs"]
                if any(x["code"] == "added_before_frontier" for x in r["reasons"])}
    assert x_before == {rid for rid, w in where.items() if w == 3}
    assert {r.row["version"] for r in env.runs("parked")} == {3}     # nothing was stored by the plan
    assert [v["version"] for v in env.call(versions(env.store, env.project, "wf_parked"))] == [3]

    env.publish(V4)
    report = env.call(migrate_runs(env.store, env.project, "wf_parked", 4, by="test", why="issue 31"))
    assert report.counts() == {"moved": N_RUNS}, report.counts()
    for k in (1, 2, 3):
        for run_id, w in where.items():
            if w <= k:
                env.call(env.app.signal(run_id, f"g{k}"))
        env.settle()
    env.run_until_idle()
    final = env.runs("parked")
    assert {(r.row["state"], r.row["version"]) for r in final} == {("succeeded", 4)}
    calls = Counter(c.idempotency_key for c in work.calls)
    assert set(calls.values()) == {1}, [k for k, n in calls.items() if n > 1][:5]      # nothing ran twice
    for run_id, w in where.items():
        after = {k.split(":", 1)[1] for k in calls if k.startswith(run_id + ":")} - \
            {k.split(":", 1)[1] for k in calls_before if k.startswith(run_id + ":")}
        assert after == _oracle(w)[1], (run_id, w, after)
        if w > 1:       # the renamed step ran once, as `b`, before the move; never as `b2`
            assert f"{run_id}:b" in calls_before and f"{run_id}:b2" not in calls
    moved = [e for e in env.call(env.store.list_run_events(next(iter(where)))) if e["kind"] == "run_version_changed"]
    assert len(moved) == 1 and moved[0]["data"]["by"] == "test" and moved[0]["data"]["reason"] == "issue 31"


def test_the_v4_ir_keeps_its_migrate_block_and_versioning(a44_env):
    a44_env.mock("connector/acct.work", Ok({}))
    a44_env.publish(V3)
    report = a44_env.publish(V4.replace("maxDuration: 60d\n", "maxDuration: 60d\nversioning: auto-upgrade\n"))
    doc = a44_env.call(a44_env.store.get_version(a44_env.project, "wf_parked", 4))["ir"]
    ir = load_workflow_ir(doc)
    assert report.ok and ir.versioning == "auto-upgrade"
    assert ir.migrate is not None and ir.migrate.rename == {"b": "b2"} and ir.migrate.added_before_frontier == "skip"
    assert a44_env.call(plan_workflow(a44_env.store, a44_env.project, ir)).runs == []
