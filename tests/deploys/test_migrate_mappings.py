"""What a move writes (docs/deploys.md "runs migrate"): `migrate: outputs` recomputes a completed step's output,
which later steps read under its new id; a completed step the new version would run again is refused unless
`--allow-reexecute`, and then listed and run once more; `--rate` and `--filter` are checked. The test kit."""

from __future__ import annotations

import pytest

from anthares44.automation.app.run_migration import migrate_runs, rate_per_s
from anthares44.automation.errors import A44Error
from anthares44.automation.testkit import Ok

V1 = """\
name: mapped
version: 1
steps:
  - id: charge
    uses: connector/pay.charge
    timeout: 5s
  - id: w
    wait: {signal: go, timeout: 1d, onTimeout: fail}
  - id: notify
    uses: connector/pay.notify
    timeout: 5s
    with: {ref: "{{ steps.charge.output.charge }}"}
"""
V2_OUTPUTS = """\
name: mapped
version: 2
migrate:
  from: [1]
  rename: {charge: charge-card}
  outputs: {charge-card: "{'id': output.charge, 'was': 'v1'}"}
steps:
  - id: charge-card
    uses: connector/pay.charge
    timeout: 5s
  - id: w
    wait: {signal: go, timeout: 1d, onTimeout: fail}
  - id: notify
    uses: connector/pay.notify
    timeout: 5s
    with: {ref: "{{ steps['charge-card'].output.id }}/{{ steps['charge-card'].output.was }}"}
"""
V2_LOOKALIKE = V1.replace("version: 1", "version: 2").replace("id: charge\n", "id: charge-card\n").replace(
    "steps.charge.output", "steps['charge-card'].output")


def _parked(env, n: int = 2) -> tuple[object, object, list[str]]:
    charge = env.mock("connector/pay.charge", Ok({"charge": "ch_1"}))
    notify = env.mock("connector/pay.notify", Ok({}))
    env.publish(V1)
    ids = [env.run("mapped", {}, idempotency_key=f"m{i}").id for i in range(n)]
    return charge, notify, ids


def _finish(env, ids):
    for r in ids:
        env.call(env.app.signal(r, "go"))
    env.settle()
    return [(env.get(r).row["state"], env.get(r).row["version"]) for r in ids]


def test_outputs_recompute_a_completed_steps_output_read_under_its_new_id(a44_env):
    env = a44_env
    charge, notify, ids = _parked(env)
    env.publish(V2_OUTPUTS)
    report = env.call(migrate_runs(env.store, env.project, "wf_mapped", 2, by="t"))
    assert report.counts() == {"moved": 2}
    assert report.results[0].plan.move.outputs.keys() == {"charge-card"}
    assert _finish(env, ids) == [("succeeded", 2)] * 2
    assert [c.params for c in notify.calls] == [{"ref": "ch_1/v1"}] * 2
    assert len(charge.calls) == 2        # once per run, before the move
    assert env.get(ids[0]).attempts("charge-card")[-1]["result"] == {"id": "ch_1", "was": "v1"}


def test_a_step_that_would_run_again_is_refused_unless_allowed_and_then_listed(a44_env):
    env = a44_env
    charge, notify, ids = _parked(env, 1)
    env.publish(V2_LOOKALIKE)
    refused = env.call(migrate_runs(env.store, env.project, "wf_mapped", 2, by="t"))
    (r,) = refused.results
    assert (r.outcome, r.plan.reasons[0].code) == ("blocked", "looks_renamed")
    assert "rename: {charge: charge-card}" in r.plan.reasons[0].hint
    allowed = env.call(migrate_runs(env.store, env.project, "wf_mapped", 2, by="t", allow_reexecute=True))
    (r,) = allowed.results
    assert (r.outcome, r.to_dict()["reexecute"]) == ("moved", ["charge-card"])
    assert _finish(env, ids) == [("succeeded", 2)]
    assert [c.step_id for c in charge.calls] == ["charge", "charge-card"]     # it did run again, as asked


def test_the_filter_selects_runs_and_a_bad_rate_is_refused(a44_env):
    env = a44_env
    _, _, ids = _parked(env, 3)
    env.publish(V2_OUTPUTS)
    report = env.call(migrate_runs(env.store, env.project, "wf_mapped", 2, by="t",
                                   filter=f'run.run_id == "{ids[1]}"', rate="100/s"))
    assert [r.run_id for r in report.results] == [ids[1]]
    assert (rate_per_s("50/s"), rate_per_s("600/m"), rate_per_s("7"), rate_per_s(None)) == (50.0, 10.0, 7.0, None)
    for bad in ("fast", "0/s", "5/week", "-1"):
        with pytest.raises(A44Error) as e:
            rate_per_s(bad)
        assert e.value.code == "E_INVALID_ARGUMENT"


def test_retire_with_migrate_to_moves_the_runs_first_and_keeps_refusing_while_one_cannot_move(a44_env):
    from anthares44.automation.app.run_migration import retire, versions

    env = a44_env
    _, _, ids = _parked(env, 2)
    env.publish(V2_LOOKALIKE)       # `charge` is gone unmapped: both runs are blocked
    with pytest.raises(A44Error) as e:
        env.call(retire(env.store, env.project, "wf_mapped", 1, migrate_to=2, by="t"))
    assert e.value.code == "E_VERSION_HAS_OPEN_RUNS" and e.value.details["open_runs"] == 2
    assert e.value.details["migration"]["counts"] == {"blocked": 2}
    env.publish(V2_OUTPUTS.replace("version: 2", "version: 3").replace("from: [1]", "from: [1, 2]"))
    done = env.call(retire(env.store, env.project, "wf_mapped", 1, migrate_to=3, by="t", why="drain v1"))
    assert (done["outcome"], done["migration"]["counts"]) == ("deleted", {"moved": 2})
    assert [v["version"] for v in env.call(versions(env.store, env.project, "wf_mapped"))] == [2, 3]
    assert _finish(env, ids) == [("succeeded", 3)] * 2
