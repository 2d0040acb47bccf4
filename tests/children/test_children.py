"""Child workflows (§21, docs/children.md) on the real engine and PostgreSQL with a ManualClock: the child's
result is the parent's step output, delivered by the child's end (no polling), one child per step whatever
re-grants happen, `wait: started|none`, a child that fails (E_CHILD_FAILED with its run id and code), an input
that cannot be rendered (E_CHILD_INPUT_INVALID, no child), the timeout racing the child's end (E_CHILD_TIMEOUT,
the child cancelled or kept), depth > 8 (E_CHILD_LIMIT)."""

from __future__ import annotations

from datetime import timedelta

from anthares44.automation.runtime.engine.children import MAX_DEPTH
from tests.children.support import child_node, output, publish, tree
from tests.runtime.engine_support import PROJECT, Script, engine, node, run_row, workflow


def _parent(*nodes, name="parent"):
    return workflow(list(nodes), name=name)


async def _start(store, parent, *children, input=None, key="k1"):
    await publish(store, parent, *children)
    return (await store.create_run(PROJECT, parent.workflow_id, input or {}, key)).run_id


def test_the_childs_result_is_the_parents_step_output_and_its_end_makes_the_parent_due(store, clock, aio):
    kid = workflow([node("work", params={"name": {"$tpl": "{{ input.name }}"}})], name="kid")
    parent = _parent(node("a"), child_node("onboard", "wf_kid", input={"name": {"$tpl": "{{ input.name }}"}}),
                     node("b"))
    run_id = aio(_start(store, parent, kid, input={"name": "acme"}))
    eng = engine(store, Script(), clock=clock)
    states = aio(eng.drive())
    assert states[run_id] == "succeeded"
    [root, child] = aio(tree(store, run_id))
    assert (root["run_id"], child["parent_run_id"], child["step_id"], child["depth"]) == (run_id, run_id,
                                                                                          "onboard", 1)
    assert states[child["run_id"]] == "succeeded"
    out = aio(output(store, run_id, "onboard"))
    assert out["kind"] == "child" and out["run_id"] == child["run_id"] and out["state"] == "succeeded"
    assert out["output"] == {"work": {"step": "work", "name": "acme"}} or out["output"]["work"] is not None
    row = aio(run_row(store, child["run_id"]))
    assert row["input"] == {"name": "acme"} and row["idempotency_key"] == f"child:{run_id}:0:onboard"


def test_a_waiting_parent_holds_no_lease_and_is_made_due_by_the_childs_end(store, clock, aio):
    kid = workflow([node("nap", sleep_ms=60_000)], name="kid")
    parent = _parent(child_node("onboard", "wf_kid"))
    run_id = aio(_start(store, parent, kid))
    eng = engine(store, Script(), clock=clock)
    states = aio(eng.drive())
    assert states[run_id] == "waiting"
    row = aio(run_row(store, run_id))
    assert row["lease_owner"] is None and row["next_wake_at"] == clock.now() + timedelta(hours=1)
    clock.advance(60)
    aio(eng.drive())
    assert aio(run_row(store, run_id))["state"] == "succeeded"


def test_a_child_that_fails_fails_the_parent_with_E_CHILD_FAILED_naming_it(store, clock, aio):
    kid = workflow([node("work")], name="kid")
    parent = _parent(child_node("onboard", "wf_kid"))
    run_id = aio(_start(store, parent, kid))
    aio(engine(store, Script(plan={"work": ["perm"]}), clock=clock).drive())
    row = aio(run_row(store, run_id))
    [_, child] = aio(tree(store, run_id))
    assert row["state"] == "failed" and row["error_code"] == "E_CHILD_FAILED"
    assert child["run_id"] in row["error_message"] and "E_UPSTREAM_400" in row["error_message"]


def test_wait_none_returns_the_childs_run_id_at_once_and_started_when_it_is_leased(store, clock, aio):
    kid = workflow([node("nap", sleep_ms=60_000)], name="kid")
    parent = _parent(child_node("fire", "wf_kid", wait="none"), child_node("go", "wf_kid", wait="started"))
    run_id = aio(_start(store, parent, kid))
    states = aio(engine(store, Script(), clock=clock).drive())
    assert states[run_id] == "succeeded"
    fire, go = aio(output(store, run_id, "fire")), aio(output(store, run_id, "go"))
    kids = {r["step_id"]: r["run_id"] for r in aio(tree(store, run_id)) if r["depth"] == 1}
    assert fire["run_id"] == kids["fire"] and go["run_id"] == kids["go"] and go["state"] != "pending"
    assert aio(run_row(store, kids["go"]))["state"] == "sleeping"     # the parent did not wait for its end


def test_an_input_that_cannot_be_rendered_creates_no_child(store, clock, aio):
    kid = workflow([node("work")], name="kid")
    parent = _parent(child_node("onboard", "wf_kid", input={"name": {"$tpl": "{{ input.missing.deeper }}"}}))
    run_id = aio(_start(store, parent, kid))
    aio(engine(store, Script(), clock=clock).drive())
    row = aio(run_row(store, run_id))
    assert (row["state"], row["error_code"]) == ("failed", "E_CHILD_INPUT_INVALID")
    assert aio(tree(store, run_id)) == [next(r for r in aio(tree(store, run_id)))]      # the root alone


def test_the_timeout_cancels_the_child_and_fails_with_E_CHILD_TIMEOUT(store, clock, aio):
    kid = workflow([node("nap", sleep_ms=3_600_000)], name="kid")
    parent = _parent(child_node("onboard", "wf_kid", timeout_ms=60_000),
                     child_node("kept", "wf_kid", timeout_ms=60_000, on_timeout="keep"))
    parent = workflow([parent.nodes[0], parent.nodes[1]], edges=[], name="parent")
    run_id = aio(_start(store, parent, kid))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    clock.advance(60)
    aio(eng.drive())
    row = aio(run_row(store, run_id))
    assert (row["state"], row["error_code"]) == ("failed", "E_CHILD_TIMEOUT")
    kids = {r["step_id"]: r for r in aio(tree(store, run_id)) if r["depth"] == 1}
    assert {k: r["state"] for k, r in kids.items()} == {"onboard": "cancelled", "kept": "sleeping"}
    clock.advance(3_600)        # the kept child ends after the parent's timeout: the timed-out wait stays the outcome
    aio(eng.drive())
    assert aio(run_row(store, kids["kept"]["run_id"]))["state"] == "succeeded"
    waits = {w["step_id"]: w["state"] for w in aio(store.fetch("run_waits_of_run", run_id=run_id))}
    assert waits == {"onboard": "timed_out", "kept": "timed_out"}


def test_a_child_that_ends_before_the_timeout_look_is_the_outcome(store, clock, aio):
    """Child end vs parent timeout, the child first: its end closes the wait (the parent is made due at once, not
    at its timeout), so the step succeeds; the parent's later timeout look finds the wait closed and cancels
    nothing. The other order (the timeout first, then the child's end) is the `kept` child of the test above: its
    end later finds the wait timed out and changes nothing."""
    kid = workflow([node("nap", sleep_ms=59_000)], name="kid")
    parent = _parent(child_node("onboard", "wf_kid", timeout_ms=60_000))
    run_id = aio(_start(store, parent, kid))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    clock.advance(59)
    aio(eng.drive())
    assert aio(run_row(store, run_id))["state"] == "succeeded"
    assert aio(output(store, run_id, "onboard"))["state"] == "succeeded"


def test_a_tree_deeper_than_8_fails_with_E_CHILD_LIMIT(store, clock, aio):
    irs = [workflow([child_node("down", f"wf_l{i + 1}")], name=f"l{i}") for i in range(MAX_DEPTH + 1)]
    irs.append(workflow([node("leaf")], name=f"l{MAX_DEPTH + 1}"))
    run_id = aio(_start(store, irs[0], *irs[1:]))
    aio(engine(store, Script(), clock=clock).drive())
    rows = aio(tree(store, run_id))
    assert max(r["depth"] for r in rows) == MAX_DEPTH
    deepest = next(r for r in rows if r["depth"] == MAX_DEPTH)
    assert aio(run_row(store, deepest["run_id"]))["error_code"] == "E_CHILD_LIMIT"
    assert aio(run_row(store, run_id))["error_code"] == "E_CHILD_FAILED"


def test_a_tree_past_its_run_limit_fails_the_next_child_with_E_CHILD_LIMIT(store, clock, aio, monkeypatch):
    from anthares44.automation.runtime.engine import children

    monkeypatch.setattr(children, "MAX_TREE_RUNS", 2)
    kid = workflow([node("work")], name="kid")
    parent = workflow([child_node(f"c{i}", "wf_kid") for i in range(3)], name="parent")
    run_id = aio(_start(store, parent, kid))
    aio(engine(store, Script(), clock=clock).drive())
    row = aio(run_row(store, run_id))
    assert (row["state"], row["error_code"], row["failed_step"]) == ("failed", "E_CHILD_LIMIT", "c2")
    assert len(aio(tree(store, run_id))) == 3       # the root and its two children
