"""The plan's classifier (compiler/deploy_diff.py), pure, no database: two compiled versions and where a run stands
give compatible, mappable or blocked, with the reason and the first differing step."""

from __future__ import annotations

from pathlib import Path

import pytest

from anthares44.automation.compiler.deploy_diff import (
    BLOCKED,
    COMPATIBLE,
    MAPPABLE,
    classify,
    stand_of,
    step_hash,
    version_diff,
)
from anthares44.automation.compiler.lint import lint_paths

CALL = "  - id: {id}\n    uses: pass\n    timeout: {t}\n"
WAIT = "  - id: {id}\n    wait: {{signal: {sig}, timeout: 1d, onTimeout: fail}}\n"
SLEEP = "  - id: {id}\n    sleep: {d}\n"


def ir(tmp_path: Path, version: int, steps: str, head: str = ""):
    f = tmp_path / f"v{version}_{abs(hash(steps + head))}.yaml"
    f.write_text(f"name: flow\nversion: {version}\n{head}steps:\n{steps}")
    res = lint_paths([str(f)], lower=True)
    assert not [d for d in res.diagnostics if d.severity.value == "error"], [d.format() for d in res.diagnostics]
    return res.irs["wf_flow"]


def steps(*parts: str) -> str:
    return "".join(parts)


A, B, C = CALL.format(id="a", t="5s"), CALL.format(id="b", t="5s"), CALL.format(id="c", t="5s")
W = WAIT.format(id="w", sig="go")


def at(version: int, completed=(), active=(), state="waiting"):
    rows = [(s, "action", "succeeded") for s in completed] + [(s, "action", "running") for s in active]
    return stand_of("run_1", version, state, rows)


def test_a_step_added_after_the_frontier_is_compatible(tmp_path):
    old, new = ir(tmp_path, 1, steps(A, W, B)), ir(tmp_path, 2, steps(A, W, B, C))
    p = classify(old, new, at(1, ["a"], ["w"]))
    assert (p.outcome, p.reasons, p.first_difference) == (COMPATIBLE, [], None)


def test_a_step_added_before_the_frontier_is_blocked_then_mappable_with_added_before_frontier(tmp_path):
    old = ir(tmp_path, 1, steps(A, W, B))
    bare = ir(tmp_path, 2, steps(A, C, W, B))
    p = classify(old, bare, at(1, ["a"], ["w"]))
    assert (p.outcome, p.first_difference, p.reasons[0].code) == (BLOCKED, "c", "added_before_frontier")
    assert "addedBeforeFrontier" in p.reasons[0].hint
    mig = ir(tmp_path, 2, steps(A, C, W, B), "migrate: {from: [1], addedBeforeFrontier: skip}\n")
    p = classify(old, mig, at(1, ["a"], ["w"]))
    assert (p.outcome, p.move.skip_added) == (MAPPABLE, ["c"])
    # a run that has not reached `w` yet meets `c` as a new step at its frontier: compatible
    assert classify(old, bare, at(1, [], ["a"])).outcome == COMPATIBLE


def test_a_completed_step_removed_or_renamed_is_blocked_unless_migrate_maps_it(tmp_path):
    old = ir(tmp_path, 1, steps(A, B, W))
    renamed = ir(tmp_path, 2, steps(A, CALL.format(id="b2", t="5s"), W))
    p = classify(old, renamed, at(1, ["a", "b"], ["w"]))
    assert (p.outcome, p.first_difference, p.reasons[0].code) == (BLOCKED, "b", "looks_renamed")
    assert "rename: {b: b2}" in p.reasons[0].hint
    mapped = ir(tmp_path, 2, steps(A, CALL.format(id="b2", t="5s"), W), "migrate: {from: [1], rename: {b: b2}}\n")
    p = classify(old, mapped, at(1, ["a", "b"], ["w"]))
    assert (p.outcome, p.move.renames) == (MAPPABLE, {"b": "b2"})
    # the block covers version 1 only: a run of another version is not mapped by it
    assert classify(old.model_copy(update={"version": 7}), mapped, at(7, ["a", "b"], ["w"])).outcome == BLOCKED
    # --allow-reexecute: the step runs again, listed
    p = classify(old, renamed, at(1, ["a", "b"], ["w"]), allow_reexecute=True)
    assert (p.outcome, p.move.reexecute) == (MAPPABLE, ["b2"])
    gone = ir(tmp_path, 2, steps(A, W))
    assert classify(old, gone, at(1, ["a", "b"], ["w"])).reasons[0].code == "removed"
    skipped = ir(tmp_path, 2, steps(A, W), "migrate: {from: [1], removed: {b: skip}}\n")
    assert classify(old, skipped, at(1, ["a", "b"], ["w"])).outcome == MAPPABLE


def test_the_parked_steps_shape_or_kind_changed_is_blocked_even_with_migrate(tmp_path):
    old = ir(tmp_path, 1, steps(A, W, B))
    other_signal = ir(tmp_path, 2, steps(A, WAIT.format(id="w", sig="other"), B), "migrate: {from: [1]}\n")
    p = classify(old, other_signal, at(1, ["a"], ["w"]))
    assert (p.outcome, p.first_difference, p.reasons[0].code) == (BLOCKED, "w", "shape_changed")
    to_sleep = ir(tmp_path, 2, steps(A, SLEEP.format(id="w", d="1h"), B), "migrate: {from: [1]}\n")
    assert classify(old, to_sleep, at(1, ["a"], ["w"])).reasons[0].code == "kind_changed"
    completed_kind = ir(tmp_path, 2, steps(SLEEP.format(id="a", d="1h"), W, B), "migrate: {from: [1]}\n")
    assert classify(old, completed_kind, at(1, ["a"], ["w"])).reasons[0].code == "kind_changed"
    # the same wait with a change after it stays compatible
    later = ir(tmp_path, 2, steps(A, W, CALL.format(id="b", t="9s")))
    assert classify(old, later, at(1, ["a"], ["w"])).outcome == COMPATIBLE


def test_a_changed_completed_step_needs_a_migrate_block_and_is_never_rerun(tmp_path):
    old = ir(tmp_path, 1, steps(A, W))
    changed = ir(tmp_path, 2, steps(CALL.format(id="a", t="9s"), W))
    p = classify(old, changed, at(1, ["a"], ["w"]))
    assert (p.outcome, p.reasons[0].code) == (BLOCKED, "changed")
    accepted = ir(tmp_path, 2, steps(CALL.format(id="a", t="9s"), W), "migrate: {from: [1]}\n")
    p = classify(old, accepted, at(1, ["a"], ["w"]))
    assert (p.outcome, p.move.reexecute) == (MAPPABLE, [])


@pytest.mark.parametrize("state", ["compensating", "awaiting_confirmation"])
def test_a_run_compensating_or_awaiting_a_person_is_blocked(tmp_path, state):
    old, new = ir(tmp_path, 1, steps(A, W, B)), ir(tmp_path, 2, steps(A, W, B, C))
    p = classify(old, new, at(1, ["a"], ["w"], state=state))
    assert (p.outcome, p.reasons[0].code) == (BLOCKED, "unsettled")


def test_stand_reads_the_last_action_and_partitions(tmp_path):
    s = stand_of("r", 1, "running", [("a", "action", "failed"), ("a", "action", "succeeded"),
                                     ("b", "compensation", "succeeded"), ("f[2026-01-01]", "action", "succeeded"),
                                     ("g", "action", "lease_expired")])
    assert (s.completed, s.active) == ({"a"}, {"f", "g"})


def test_the_version_diff_names_added_removed_changed_and_lookalike_renames(tmp_path):
    old = ir(tmp_path, 1, steps(A, B, W))
    new = ir(tmp_path, 2, steps(A, CALL.format(id="b2", t="5s"), WAIT.format(id="w", sig="x"), C))
    d = version_diff(old, new)
    assert (d["added"], d["removed"], d["changed"]) == (["b2", "c"], ["b"], ["w"])
    assert d["looks_renamed"] == {"b": "b2"} and step_hash(old.node("b")) == step_hash(new.node("b2"))


def test_a_code_workflow_is_blocked_with_a_pointer_to_the_replay_gate(tmp_path):
    old, new = ir(tmp_path, 1, steps(A, W)), ir(tmp_path, 2, steps(A, W))
    p = classify(old.model_copy(update={"kind": "code"}), new, at(1, ["a"], ["w"]))
    assert (p.outcome, p.reasons[0].code) == (BLOCKED, "code") and "verify" in p.reasons[0].hint
