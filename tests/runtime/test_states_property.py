"""Property test (hypothesis) of the interpreter on real PostgreSQL: random per-attempt outcomes for each step
(ok / retryable / permanent / timeout) and random compensation outcomes. Checked: the final state the script
implies, attempt counts within budget, no step re-run after it succeeded, compensation in reverse completion
order, and every logged run state change allowed by the state machine."""

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anthares44.automation.runtime.engine import is_legal
from tests.runtime.engine_support import Script, engine, node, publish_and_run, workflow

OUTCOME = st.sampled_from(["ok", "retry", "perm", "timeout"])
STEP = st.fixed_dictionaries({
    "max": st.integers(0, 2),
    "script": st.lists(OUTCOME, min_size=1, max_size=4),
    "compensate": st.booleans(),
    "undo": st.lists(st.sampled_from(["ok", "retry"]), min_size=0, max_size=3),
})
_versions = itertools.count(1)


def expected(steps) -> tuple[str, list[int]]:
    """(final state, indexes of steps whose compensation runs) from the scripts alone."""
    done = []
    for i, s in enumerate(steps):
        outcomes = s["script"] + ["ok"] * 10      # the script connector answers ok when its list runs out
        ok = False
        for o in outcomes[: s["max"] + 1]:
            if o == "ok":
                ok = True
                break
            if o == "perm":
                break
        if not ok:
            comps = [j for j in reversed(done) if steps[j]["compensate"]]
            for j in comps:
                undo = steps[j]["undo"] + ["ok"] * 3
                if "ok" not in undo[:3]:
                    return "compensation_failed", comps[: comps.index(j) + 1]
            return "failed", comps
        done.append(i)
    return "succeeded", []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=4))
def test_random_outcomes_respect_the_state_machine(store, clock, aio, steps):
    ids = [f"s{i}" for i in range(len(steps))]
    act = Script(plan={sid: s["script"] for sid, s in zip(ids, steps)})
    undo = Script("undo", plan={sid: s["undo"] for sid, s in zip(ids, steps)})
    nodes = [node(sid, retry=(s["max"], "exponential-jitter"), base_ms=100, cap_ms=1000, timeout_ms=40,
                  compensate="undo" if s["compensate"] else None) for sid, s in zip(ids, steps)]
    version = next(_versions)
    ir = workflow(nodes, name="prop", version=version)
    run_id = aio(publish_and_run(store, ir, key=f"prop-{version}"))
    eng = engine(store, act, undo, clock=clock, seed=version)
    for _ in range(40):
        aio(eng.drive())
        state = aio(store.get_run(run_id))["state"]
        if state in ("succeeded", "failed", "compensation_failed"):
            break
        clock.advance(61)
    want_state, want_comps = expected(steps)
    assert state == want_state

    rows = aio(store.list_attempts(run_id))
    for sid, s in zip(ids, steps):
        actions = [r for r in rows if r["step_id"] == sid and r["kind"] == "action"]
        assert len(actions) <= s["max"] + 1
        statuses = [r["status"] for r in sorted(actions, key=lambda r: r["attempt"])]
        if "succeeded" in statuses:
            assert statuses.index("succeeded") == len(statuses) - 1          # never run again after success
        assert sum(1 for r in rows if r["step_id"] == sid and r["kind"] == "compensation") <= 3
    # compensation order: reverse completion order (completion = the order of attempt.finished events)
    events = aio(store.list_run_events(run_id))
    completed = [e["step_id"] for e in events if e["kind"] == "attempt.finished" and e["status"] == "succeeded"
                 and e["data"]["kind"] == "action"]
    compensated = []
    for c in undo.calls:
        if c[0] not in compensated:
            compensated.append(c[0])
    plan = [sid for sid in reversed(completed) if steps[ids.index(sid)]["compensate"]]
    assert compensated == plan[: len(compensated)]
    assert compensated == [ids[j] for j in want_comps]
    for e in events:
        if e["kind"] == "run.state":
            assert is_legal(e["data"]["from"], e["state"]), (e["data"]["from"], e["state"])
