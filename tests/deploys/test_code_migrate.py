"""`runs migrate` of a code workflow (§23, docs/deploys.md "Code workflows"): each open run is judged by replaying
its history against the target version's code (the replay gate, zero connector calls). A version that swaps two
steps is refused for a run past them (blocked, named at the step); a version that guards the swap with
`step.patched` takes the run, which finishes on it, its completed steps never run again. A run stopped in
`blocked_version` moved to such a version goes back to `pending` and finishes."""

from __future__ import annotations

from datetime import timedelta

from anthares44.automation.sdk.loader import import_path
from tests.code.support import published_code
from tests.code.test_verify import V1, V2, V2_PATCHED
from tests.runtime.engine_support import engine
from tests.runtime.pg import query

V3_PATCHED = V2_PATCHED.replace('@workflow("swapflow", version=2)', '@workflow("swapflow", version=3)')


def _outcomes(report: dict) -> dict[str, str]:
    return {r["run_id"]: r["outcome"] for r in report["runs"]}


def _planned(aio, auto, path) -> dict[str, str]:
    """`publish --plan` of a code file: each open run's class (nothing stored)."""
    doc = aio(auto.publish_plan([str(path)])).to_dict()
    assert doc["stored"] is False
    return {r["run_id"]: r["class"] for w in doc["workflows"] for r in w["runs"]}


def test_migrate_moves_a_code_run_only_to_code_that_replays_it_and_unblocks_a_blocked_version_run(
        store, clock, aio, tmp_path, pg_url):
    auto = aio(published_code(store, tmp_path, "mig_v1.py", V1.replace("PATCH", "False")))
    sleeping = aio(auto.run("swapflow", {"n": 1}, "sleeping")).run_id
    blocked = aio(auto.run("swapflow", {"n": 2}, "blocked")).run_id
    eng = engine(store, clock=clock, lease_s=30)
    aio(eng.drive())                                        # both ran a, b and sleep at nap
    v1 = import_path(tmp_path / "mig_v1.py")
    assert sorted(v1.CALLS) == ["a", "a", "b", "b"]
    # `blocked` meets a divergence live: the deployed v1 code now asks for c before b
    v1.SWAPPED["on"] = True
    query(pg_url, "update automation.runs set next_wake_at = $2 where run_id = $1", blocked, clock.now())
    aio(eng.drive())
    assert aio(store.get_run(blocked))["state"] == "blocked_version"
    assert aio(store.get_run(sleeping))["state"] == "sleeping"
    v1.SWAPPED["on"] = False

    (tmp_path / "mig_v2.py").write_text(V2)                 # swaps b and c: contradicts both histories
    assert _planned(aio, auto, tmp_path / "mig_v2.py") == {sleeping: "blocked", blocked: "blocked"}
    assert aio(auto.publish([str(tmp_path / "mig_v2.py")])).ok
    report = aio(auto.migrate_runs("swapflow", 2, by="ops", why="try v2"))
    assert _outcomes(report) == {sleeping: "blocked", blocked: "blocked"}
    reasons = {r["run_id"]: r["reasons"][0] for r in report["runs"]}
    assert {r["step"] for r in reasons.values()} == {"c"} and {r["code"] for r in reasons.values()} == {"diverges"}
    assert {aio(store.get_run(r))["version"] for r in (sleeping, blocked)} == {1}

    (tmp_path / "mig_v3.py").write_text(V3_PATCHED)         # the swap behind step.patched: old runs keep b, c
    assert _planned(aio, auto, tmp_path / "mig_v3.py") == {sleeping: "compatible", blocked: "compatible"}
    assert aio(auto.publish([str(tmp_path / "mig_v3.py")])).ok
    report = aio(auto.migrate_runs("swapflow", 3, by="ops", why="patched"))
    assert _outcomes(report) == {sleeping: "moved", blocked: "moved"}
    unblocked = aio(store.get_run(blocked))
    assert (unblocked["state"], unblocked["version"], unblocked["error_code"]) == ("pending", 3, None)

    clock.advance(timedelta(seconds=11))
    aio(eng.drive())
    for run_id in (sleeping, blocked):
        run = aio(store.get_run(run_id))
        assert (run["state"], run["version"]) == ("succeeded", 3)
    assert import_path(tmp_path / "mig_v3.py").CALLS == ["c", "c"]     # only the steps the runs had not done
    logged = query(pg_url, "select run_id, data->>'from', data->>'to' from automation.run_events "
                           "where kind = 'run_version_changed' order by run_id")
    assert sorted(logged) == sorted([(sleeping, "1", "3"), (blocked, "1", "3")])
