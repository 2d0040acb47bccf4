"""Cancel cascades down a tree of child workflows (§21, docs/children.md "Cancel"): one cancel of the root cancels
every `onParentCancel: cancel` descendant in the same statement (the issue's tree: depth 3, 50 sleeping or
waiting nodes), an `abandon` subtree runs on and finishes, and a child ending while its parent is being cancelled
does not deadlock the two (the cancel locks the subtree deepest first, the child's end locks itself first)."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from anthares44.automation.runtime.engine.cancels import cancel
from tests.children.support import child_node, publish, tree
from tests.runtime.engine_support import PROJECT, Script, engine, node, run_row, workflow

LIVE = ("pending", "running", "waiting", "sleeping")


def _tree_irs():
    """root -> 2 x a -> 3 x b -> 7 x c (sleeping leaves): 50 nodes below the root, depth 3; root also starts
    `side` (abandon), which sleeps a minute and ends."""
    c = workflow([node("nap", sleep_ms=3_600_000)], name="c")
    b = workflow([child_node(f"c{i}", "wf_c") for i in range(7)], edges=[], name="b")
    a = workflow([child_node(f"b{i}", "wf_b") for i in range(3)], edges=[], name="a")
    side = workflow([node("nap", sleep_ms=60_000)], name="side")
    root = workflow([child_node("a0", "wf_a"), child_node("a1", "wf_a"),
                     child_node("side", "wf_side", on_parent_cancel="abandon")], edges=[], name="root")
    return root, a, b, c, side


async def _settle(eng, rounds: int = 10) -> None:
    for _ in range(rounds):
        await eng.drive()


def test_cancelling_the_root_cancels_all_50_in_one_statement_and_the_abandoned_subtree_finishes(store, clock, aio):
    root, *rest = _tree_irs()
    aio(publish(store, root, *rest))
    run_id = aio(store.create_run(PROJECT, root.workflow_id, {}, "tree-1")).run_id
    eng = engine(store, Script(), clock=clock, concurrency=64)
    aio(_settle(eng))
    nodes = aio(tree(store, run_id))
    below = [r for r in nodes if r["depth"] >= 1 and r["step_id"] != "side"]
    assert len(below) == 50 and max(r["depth"] for r in below) == 3
    assert {r["state"] for r in below} <= {"waiting", "sleeping"}
    started = time.perf_counter()
    out = aio(cancel(store, PROJECT, run_id, by="ana", reason="tree"))
    elapsed = time.perf_counter() - started
    print(f"cancel of a 50-node tree: {elapsed * 1000:.1f} ms")
    assert out["outcome"] == "cancelled"
    nodes = {r["run_id"]: r for r in aio(tree(store, run_id))}
    assert [r["state"] for r in nodes.values() if r["step_id"] != "side"] == ["cancelled"] * 51
    side = next(r for r in nodes.values() if r["step_id"] == "side")
    assert side["state"] == "sleeping"
    clock.advance(60)
    aio(_settle(eng, 2))
    assert aio(run_row(store, side["run_id"]))["state"] == "succeeded"
    for r in nodes.values():     # who asked is carried down: each child names its parent
        if r["parent_run_id"] is not None and r["step_id"] != "side":
            row = aio(run_row(store, r["run_id"]))
            assert row["cancelled_by"] == "ana" and r["parent_run_id"] in row["error_message"]


def test_a_child_ending_while_its_parent_is_cancelled_neither_deadlocks_nor_loses_the_cancel(store, clock, aio,
                                                                                              pg_url):
    """Cancel vs child end, the interleaving that could deadlock, driven step by step on two connections: the
    child's ending transaction holds the child's row (as engine_commit's fence does), the parent's cancel starts
    and must wait for it BEFORE it locks the parent (it locks the subtree deepest first), then the child's end
    commits, waking the parent through its row (trigger runs_children_deliver), and the cancel goes on. Had the
    cancel locked the parent first, the two would deadlock and PostgreSQL would abort one."""
    kid = workflow([node("nap", sleep_ms=3_600_000)], name="kid")
    parent = workflow([child_node("go", "wf_kid")], name="parent")
    aio(publish(store, parent, kid))
    run_id = aio(store.create_run(PROJECT, parent.workflow_id, {}, "race-1")).run_id
    aio(engine(store, Script(), clock=clock).drive())
    [_, child] = aio(tree(store, run_id))

    async def race():
        ending = await asyncpg.connect(pg_url)
        try:
            tx = ending.transaction()
            await tx.start()
            await ending.execute("select 1 from automation.runs where run_id = $1 for update", child["run_id"])
            cancelling = asyncio.ensure_future(cancel(store, PROJECT, run_id, by="ana"))
            while not await ending.fetchval(
                    "select count(*) from pg_stat_activity where datname = current_database() "
                    "and wait_event_type = 'Lock' and query like '%run_cancel%'"):
                await asyncio.sleep(0.01)
            await ending.execute("update automation.runs set state = 'succeeded', updated_at = $2, "
                                 "finished_at = $2, next_wake_at = null where run_id = $1", child["run_id"],
                                 clock.now())
            await tx.commit()
            return await cancelling
        finally:
            await ending.close()

    out = aio(race())
    assert out["outcome"] == "cancelled"
    assert aio(run_row(store, run_id))["state"] == "cancelled"
    assert aio(run_row(store, child["run_id"]))["state"] == "succeeded"     # it ended first: not cancelled
    [w] = aio(store.fetch("run_waits_of_run", run_id=run_id))
    assert (w["state"], w["satisfied_by"]) == ("satisfied", f"run:{child['run_id']}")   # its end was delivered
