"""Child workflows under real `kill -9` (issue 29's first "done when", §21, docs/children.md): parents whose step
starts a child run on two real `a44 automation serve` daemons while one of them is killed with SIGKILL and replaced
again and again. The child is created in the commit that records the parent's attempt, so whatever instant a kill
hits (before that commit, after it, while the child runs, while its end is delivered) every parent has exactly one
child and finishes with that child's output. The exact instant "right after the child's creation commits" is
driven in-process by tests/children/test_child_crash.py (a fault point there); this test adds real processes."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.store.core import Store
from tests.children.support import child_node, publish
from tests.runtime.daemon_support import ServeProcess, wait_until
from tests.runtime.engine_support import PROJECT, node, workflow
from tests.runtime.pg import query

SLOW = os.environ.get("A44_SLOW") == "1"
PARENTS, KILLS = (1000, 10) if SLOW else (40, 4)
pytestmark = pytest.mark.timeout(1800 if SLOW else 300)


async def _setup(url: str, home) -> list[str]:
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.migrate()
        await store.ensure_partitions()
        # the child sleeps a little, so kills land while children run and while their ends are delivered too
        kid = workflow([node("work", uses="pass", params={}), node("nap", uses="pass", sleep_ms=300, params={}),
                        node("more", uses="pass", params={})], name="kid9")
        parent = workflow([child_node("onboard", "wf_kid9", input={"n": "{{ input.n }}"}),
                           node("after", uses="pass", params={})], name="parent9")
        await publish(store, parent, kid)
        return [(await store.create_run(PROJECT, parent.workflow_id, {"n": i}, f"k9-{i}")).run_id
                for i in range(PARENTS)]
    finally:
        await store.close()


def _children(url: str) -> int:
    return query(url, "select count(*) as n from automation.run_children where kind = 'action'")[0]["n"]


def _states(url: str, run_ids: list[str]) -> set[str]:
    return {r["state"] for r in query(url, "select state from automation.runs where run_id = any($1)", run_ids)}


def test_kill_9s_while_parents_start_children_leave_one_child_each_and_every_parent_its_output(pg_url, tmp_path):
    parents = asyncio.run(_setup(pg_url, tmp_path))
    daemons = [ServeProcess(pg_url, tmp_path, worker_id="steady", lease="1s"),
               ServeProcess(pg_url, tmp_path, worker_id="victim-0", lease="1s")]
    try:
        seen = 0
        for k in range(KILLS):      # each kill once children are being made (not before the daemons are up)
            # (once every child exists, the later kills land while children run or their ends are delivered)
            wait_until(lambda seen=seen: _children(pg_url) > seen or seen >= PARENTS, 120, "children being created")
            seen = _children(pg_url)
            daemons[-1].kill9()
            daemons.append(ServeProcess(pg_url, tmp_path, worker_id=f"victim-{k + 1}", lease="1s"))
        wait_until(lambda: _states(pg_url, parents) == {"succeeded"}, 240, "every parent to finish")
    finally:
        for d in daemons:
            d.stop()
    links = query(pg_url, "select parent_run_id, child_run_id from automation.run_children "
                          "where parent_run_id = any($1) and kind = 'action'", parents)
    by_parent: dict[str, list[str]] = {}
    for link in links:
        by_parent.setdefault(link["parent_run_id"], []).append(link["child_run_id"])
    assert sorted(by_parent) == sorted(parents) and {len(v) for v in by_parent.values()} == {1}
    children = [v[0] for v in by_parent.values()]
    assert _states(pg_url, children) == {"succeeded"}
    made = query(pg_url, "select count(*) as n from automation.runs where workflow_id = 'wf_kid9'")[0]["n"]
    assert made == PARENTS                           # no orphan child either
    outs = {r["run_id"]: json.loads(r["result"]) for r in query(
        pg_url, "select run_id, result::text as result from automation.step_attempts where run_id = any($1) "
                "and step_id = 'onboard' and kind = 'action' and status = 'succeeded'", parents)}
    assert len(outs) == PARENTS
    for parent, kids in by_parent.items():
        assert outs[parent]["run_id"] == kids[0], outs[parent]      # its own child's result, delivered once
    print(f"\nchild workflows: {PARENTS} parents, {KILLS} kill -9 (children made before each: up to {seen}): "
          f"{PARENTS} children, all parents succeeded")
