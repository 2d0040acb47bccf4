"""Exactly one child per parent step whatever kills happen (§21, docs/children.md "Child creation vs crash"):
every parent's worker dies right after the commit that created its child, and twice more when the next worker
finds the child still running, before it releases the parent (the fault point `fault.after_child_commit`, a
service key like the test kit's kill_worker: the visit raises, nothing more is written, the lease stays until it
expires and another grant takes the run over). In the end there is exactly one child per parent and every parent
finished with its own child's output. Issue scale (1,000 parents) under A44_SLOW=1, 40 by default."""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from datetime import timedelta

from anthares44.automation.runtime.engine import Engine
from anthares44.automation.runtime.engine.children import AFTER_CHILD_COMMIT
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests import store_queries as test_queries
from tests.children.support import child_node, output, publish
from tests.runtime.engine_support import PROJECT, Script, node, run_row, workflow

SLOW = os.environ.get("A44_SLOW") == "1"
PARENTS = 1_000 if SLOW else 40
KILLS = 3
LEASE_S = 30
DAY_MS = 86_400_000    # the children outlast every round of kills


class Killed(Exception):
    """A worker killed at the fault point (raised out of the visit: nothing after it is written)."""


def test_three_kills_per_parent_after_its_child_commits_leave_exactly_one_child_each(store, clock, aio):
    kid = workflow([node("nap", sleep_ms=DAY_MS), node("work", params={"n": {"$tpl": "{{ input.n }}"}})],
                   name="kid")
    parent = workflow([child_node("onboard", "wf_kid", input={"n": {"$tpl": "{{ input.n }}"}}, timeout_ms=2 * DAY_MS),
                       node("after")],
                      name="parent")
    aio(publish(store, parent, kid))
    ids = [aio(store.create_run(PROJECT, parent.workflow_id, {"n": i}, f"crash-{i}")).run_id
           for i in range(PARENTS)]
    kills: Counter[str] = Counter()

    def kill(run_id: str, step_id: str) -> None:
        if kills[run_id] < KILLS:
            kills[run_id] += 1
            raise Killed(f"worker killed after the child commit of {run_id}:{step_id}")

    reg = ConnectorRegistry()
    reg.register(Script())
    eng = Engine(store, reg, worker_id="w1", lease=timedelta(seconds=LEASE_S), clock=clock, rng=random.Random(3),
                 concurrency=64, services={AFTER_CHILD_COMMIT: kill})
    # each round: the leases of the killed visits expire, other grants take them over (the killed visits' expired
    # leases count against the default queue's 100 slots until re-granted, so a round takes ~100 new parents)
    for _ in range(10 * PARENTS // 100 + 10):
        aio(eng.drive())
        clock.advance(LEASE_S + 1)
        if len(kills) == PARENTS and min(kills.values()) == KILLS:
            break
    aio(eng.drive())        # the last takeovers release their parents to wait for the children
    clock.advance(DAY_MS // 1000)
    for _ in range(5):
        aio(eng.drive())
    assert sorted(kills.values()) == [KILLS] * PARENTS
    [row] = aio(test_queries.fetch(store, "children_count_of_parents", run_ids=ids))
    assert row["count"] == PARENTS
    for i, run_id in enumerate(ids):
        assert aio(run_row(store, run_id))["state"] == "succeeded"
        out = aio(output(store, run_id, "onboard"))
        assert out["state"] == "succeeded" and out["output"]["work"]["params"]["n"] == i


def test_two_daemons_driving_the_same_parents_start_one_child_each(store, clock, aio, pg_url, tmp_path):
    """Two daemons: two engines on separate pools drive the same parents at once (each claim serialised by
    lease_claim, each write behind the lease fence). Every parent ends with its one child's output."""
    from anthares44.automation.runtime.store.core import Store

    kid = workflow([node("work", params={"n": {"$tpl": "{{ input.n }}"}})], name="kid")
    parent = workflow([child_node("onboard", "wf_kid", input={"n": {"$tpl": "{{ input.n }}"}}), node("after")],
                      name="parent")
    aio(publish(store, parent, kid))
    n = 60
    ids = [aio(store.create_run(PROJECT, parent.workflow_id, {"n": i}, f"two-{i}")).run_id for i in range(n)]
    other = aio(Store.connect(pg_url, clock=clock, results_dir=tmp_path / "results"))
    try:
        engines = []
        for worker, st in (("w1", store), ("w2", other)):
            reg = ConnectorRegistry()
            reg.register(Script())
            engines.append(Engine(st, reg, worker_id=worker, lease=timedelta(seconds=LEASE_S), clock=clock,
                                  rng=random.Random(len(engines)), concurrency=16))

        async def both():
            for _ in range(5):
                await asyncio.gather(*(e.drive() for e in engines))
        aio(both())
    finally:
        aio(other.close(timeout=30))
    [row] = aio(test_queries.fetch(store, "children_count_of_parents", run_ids=ids))
    assert row["count"] == n
    for i, run_id in enumerate(ids):
        assert aio(run_row(store, run_id))["state"] == "succeeded"
        assert aio(output(store, run_id, "onboard"))["output"]["work"]["params"]["n"] == i
