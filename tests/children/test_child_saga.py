"""A child that fails permanently inside a saga (§21, §6.1, docs/children.md "Compensation"): the parent records
E_CHILD_FAILED naming the child, compensates its completed steps in reverse completion order, and the
`compensate: workflow/NAME` of the completed child step starts that workflow exactly once, across the visits the
saga takes (a compensation that fails and waits its retry delay in between)."""

from __future__ import annotations

from tests.children.support import child_node, publish, tree
from tests.runtime.engine_support import PROJECT, Script, engine, node, run_row, workflow


def test_a_permanently_failing_child_compensates_in_reverse_and_runs_the_compensate_workflow_once(store, clock,
                                                                                                 aio):
    ok = workflow([node("work")], name="ok")
    bad = workflow([node("explode")], name="bad")
    off = workflow([node("undo")], name="off")
    parent = workflow([node("reserve", compensate="script"), child_node("onboard", "wf_ok", compensate="off"),
                       child_node("bill", "wf_bad")], name="parent")
    aio(publish(store, parent, ok, bad, off))
    run_id = aio(store.create_run(PROJECT, parent.workflow_id, {}, "saga-1")).run_id
    script = Script(plan={"explode": ["perm"], "reserve": ["ok", "retry", "ok"]})   # reserve's undo fails once
    eng = engine(store, script, clock=clock)
    for _ in range(4):
        aio(eng.drive())
        clock.advance(30)
    row = aio(run_row(store, run_id))
    assert (row["state"], row["error_code"], row["failed_step"]) == ("failed", "E_CHILD_FAILED", "bill")
    kids = {r["step_id"]: r for r in aio(tree(store, run_id)) if r["depth"] == 1 and r["kind"] == "action"}
    assert kids["bill"]["run_id"] in row["error_message"] and "E_UPSTREAM_400" in row["error_message"]
    comps = sorted((a for a in aio(store.list_attempts(run_id)) if a["kind"] == "compensation"),
                   key=lambda a: (a["started_at"], a["attempt"]))
    assert [(a["step_id"], a["status"]) for a in comps] == [("onboard", "compensated"), ("reserve", "failed"),
                                                            ("reserve", "compensated")]
    offs = [r for r in aio(tree(store, run_id)) if r["kind"] == "compensation"]
    assert len(offs) == 1 and offs[0]["workflow_id"] == "wf_off" and offs[0]["state"] == "succeeded"
    assert sum(1 for c in script.calls if c[0] == "undo") == 1
    child_out = aio(run_row(store, kids["onboard"]["run_id"]))["result"]
    assert aio(run_row(store, offs[0]["run_id"]))["input"] == child_out     # the child's output is its input
