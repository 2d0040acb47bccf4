"""Compensation (§6.1, §6.2): reverse completion order, 5 s / 20 s / 60 s durable waits, `failed` when all
compensations succeed, `compensation_failed` (with an alert, never cleared) when one spends its budget."""

from datetime import timedelta

from tests.runtime.engine_support import Script, attempts, engine, node, publish_and_run, run_row, workflow


def _saga(store, aio):
    # a and b run in parallel, then c; d fails for good. Completion order: b, a, c (b is released first).
    ir = workflow([node("a", compensate="undo"), node("b", compensate="undo"), node("c", compensate="undo"),
                   node("d")],
                  edges=[("a", "c"), ("b", "c"), ("c", "d")])
    return aio(publish_and_run(store, ir))


def test_compensation_runs_in_reverse_completion_order_with_durable_waits(store, clock, aio):
    act = Script(plan={"a": ["wait:b_done"], "b": ["set:b_done"], "d": ["perm"]})
    undo = Script("undo", plan={"c": ["retry", "retry", "ok"]})
    run_id = _saga(store, aio)
    eng = engine(store, act, undo, clock=clock)

    assert aio(eng.drive()) == {run_id: "compensating"}
    run = aio(run_row(store, run_id))
    assert run["lease_owner"] is None and run["failed_step"] == "d" and run["error_code"] == "E_UPSTREAM_400"
    t0 = clock.now()
    assert run["next_wake_at"] == t0 + timedelta(seconds=5)          # attempt 1 waits 5 s
    # c's compensation: fails at +5 s, waits 20 s, fails at +25 s, waits 60 s, succeeds at +85 s
    for wait, expected in ((5, "compensating"), (20, "compensating"), (60, "compensating")):
        clock.advance(wait - 0.001)
        assert aio(eng.drive()) == {}
        clock.advance(0.001)
        assert aio(eng.drive()) == {run_id: expected}
    # then a (completed second), then b (first), each after its own 5 s wait
    clock.advance(5)
    assert aio(eng.drive()) == {run_id: "compensating"}
    clock.advance(5)
    assert aio(eng.drive()) == {run_id: "failed"}
    undone = [(c[0], c[2]) for c in undo.calls]
    assert undone == [("c", 1), ("c", 2), ("c", 3), ("a", 1), ("b", 1)]
    comp_rows = [a for a in aio(attempts(store, run_id)) if a[1] == "compensation"]
    assert [r[3] for r in comp_rows] == ["failed", "failed", "compensated", "compensated", "compensated"]
    run = aio(run_row(store, run_id))
    assert (run["state"], run["failed_step"]) == ("failed", "d")


def test_a_compensation_that_spends_its_budget_leaves_compensation_failed_with_an_alert(store, clock, aio):
    act = Script(plan={"d": ["perm"]})
    undo = Script("undo", plan={"c": ["retry", "retry", "perm"]})
    run_id = aio(publish_and_run(store, workflow([node("c", compensate="undo"), node("d", retry=(3, "fixed"))])))
    eng = engine(store, act, undo, clock=clock)
    for wait in (0, 5, 20, 60):
        clock.advance(wait)
        aio(eng.drive())
    run = aio(run_row(store, run_id))
    assert (run["state"], run["error_code"], run["next_wake_at"]) == ("compensation_failed", "E_COMPENSATION_FAILED",
                                                                      None)
    alerts = [e for e in aio(store.list_run_events(run_id)) if e["kind"] == "alert"]
    assert len(alerts) == 1
    data = alerts[0]["data"]
    assert data["run_id"] == run_id and data["workflow_id"] == "wf_t" and data["failed_step"] == "d"
    assert data["compensation_step"] == "c" and data["attempts"] == 3 and data["recommended_action"]
    clock.advance(timedelta(days=10))
    assert aio(eng.drive()) == {}                                     # never cleared automatically
    assert aio(run_row(store, run_id))["state"] == "compensation_failed"
    assert undo.called("c") == 3
