"""A lineage shares its partition key (§21, docs/children.md "Partitions"): on a `by-partition` queue a child
with its parent's key runs while the parent waits (it takes the parent's place in the key's line), and a run of
that key that is not of the lineage waits for the whole lineage. Driven by the real engine and claim with a
ManualClock: the parent and child finish in one drive (no 60 s park, no deadlock), and a property test
(hypothesis) over random mixes of parents and plain runs on a few keys checks that no two lineages of one key
ever overlap and that runs of a key start in creation order."""

from __future__ import annotations

import itertools
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anthares44.automation.compiler.ir import ConcurrencyIR
from anthares44.automation.compiler.models.queues import Queue
from anthares44.automation.runtime.queues import store_queues
from tests.children.support import child_node, publish, tree
from tests.runtime.engine_support import PROJECT, Script, engine, node, run_row, workflow

KEY = {"$tpl": "{{ input.tenant }}"}
_examples = itertools.count()


def _on_queue(ir, name):
    return ir.model_copy(update={"queue": "q_tenant", "concurrency": ConcurrencyIR(max=100, partition_key=KEY)})


def _irs():
    from anthares44.automation.compiler.ir import seal

    kid = seal(_on_queue(workflow([node("work")], name="kid"), "kid"))
    parent = seal(_on_queue(workflow([node("before"), child_node("sub", "wf_kid", input={"tenant": KEY}),
                                      node("after")], name="parent"), "parent"))
    return parent, kid


async def _setup(store):
    await store_queues(store, PROJECT, [Queue(id="q_tenant", ordering="by-partition")])
    parent, kid = _irs()
    await publish(store, parent, kid)
    return parent, kid


def _owner(call_key: str) -> str:
    return call_key.split(":")[0]       # idempotency key `{run_id}:{step}`


def test_parent_and_child_on_one_key_finish_in_one_drive_and_a_third_run_waits_for_both(store, clock, aio):
    parent, kid = aio(_setup(store))
    p = aio(store.create_run(PROJECT, parent.workflow_id, {"tenant": "acme"}, "p-1", queue="q_tenant",
                             partition_key="acme")).run_id
    third = aio(store.create_run(PROJECT, kid.workflow_id, {"tenant": "acme"}, "r-1", queue="q_tenant",
                                 partition_key="acme")).run_id
    script = Script()
    started = time.perf_counter()
    states = aio(engine(store, script, clock=clock).drive())
    print(f"parent, child and a third run of one key: {(time.perf_counter() - started) * 1000:.0f} ms")
    assert states[p] == "succeeded" and states[third] == "succeeded"    # one drive: nothing parked for 60 s
    [_, child] = aio(tree(store, p))
    c = aio(run_row(store, child["run_id"]))
    assert (c["queue"], c["partition_key"], c["seq"]) == ("q_tenant", "acme", aio(run_row(store, p))["seq"])
    order = [_owner(k) for _, _, _, k in script.calls]
    assert order == [p, child["run_id"], p, third]      # the third run starts after the lineage ended


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 1)), min_size=2, max_size=6))
def test_lineages_of_one_key_never_overlap_and_start_in_creation_order(store, clock, aio, runs):
    n = next(_examples)
    if n == 0:
        aio(_setup(store))
    parent, kid = _irs()
    created = []
    for i, (is_parent, k) in enumerate(runs):
        key = f"t{n}-{k}"
        wf = parent if is_parent else kid
        created.append((aio(store.create_run(PROJECT, wf.workflow_id, {"tenant": key}, f"prop-{n}-{i}",
                                             queue="q_tenant", partition_key=key)).run_id, key))
    script = Script()
    states = aio(engine(store, script, clock=clock).drive())
    lineage = {}
    for run_id, key in created:
        assert states[run_id] == "succeeded", states
        for r in aio(tree(store, run_id)):
            lineage[r["run_id"]] = (run_id, key)
    spans: dict[str, list[int]] = {}
    for i, (_, _, _, k) in enumerate(script.calls):
        root, _ = lineage[_owner(k)]
        spans.setdefault(root, [i, i])[1] = i
    for key in {k for _, k in created}:
        roots = [r for r, k in created if k == key]
        intervals = [spans[r] for r in roots]
        assert intervals == sorted(intervals), (key, intervals)          # in creation order
        for a, b in zip(intervals, intervals[1:]):
            assert a[1] < b[0], (key, intervals)                        # and never overlapping
