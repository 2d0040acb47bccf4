"""An alert on a child workflow's run names the tree it belongs to (§21, §16): the built-in run_failed alert of a
failed child carries `root_run_id` and `parent_run_id` and says so in its title; a root run's alert has neither."""

from __future__ import annotations

from anthares44.automation.runtime.alerts import rules as rule_store
from anthares44.automation.runtime.alerts.evaluator import Evaluator
from tests.alerts.test_evaluator import _channels, _notifications
from tests.children.support import child_node, publish, tree
from tests.runtime.engine_support import PROJECT, Script, engine, node, workflow


def test_the_alert_of_a_failed_child_names_its_parent_and_root(store, clock, aio, pg_url):
    _channels(store, aio, "squad")
    aio(rule_store.upsert_builtin(store, PROJECT, notify="squad", escalate_to=None, severity="p2", window_s=600,
                                  update_every=100))
    kid = workflow([node("work")], name="kid")
    mid = workflow([child_node("down", "wf_kid")], name="mid")
    root = workflow([child_node("go", "wf_mid")], name="root")
    aio(publish(store, root, mid, kid))
    run_id = aio(store.create_run(PROJECT, root.workflow_id, {}, "alert-1")).run_id
    aio(engine(store, Script(plan={"work": ["perm"]}), clock=clock).drive())
    aio(Evaluator(store, holder="d1", interval_s=15).step())
    by_workflow = {}
    for kind, _, _, payload in _notifications(pg_url):
        if kind == "firing":
            by_workflow[payload["workflow"]] = payload
    rows = {r["workflow_id"]: r for r in aio(tree(store, run_id))}
    leaf = by_workflow["wf_kid"]
    assert (leaf["run_id"], leaf["root_run_id"], leaf["parent_run_id"]) == (rows["wf_kid"]["run_id"], run_id,
                                                                            rows["wf_mid"]["run_id"])
    assert f"root run {run_id}" in leaf["title"]
    if "wf_root" in by_workflow:
        assert "root_run_id" not in by_workflow["wf_root"]
