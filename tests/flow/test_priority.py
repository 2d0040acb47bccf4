"""`priority` (1..9 with aging) and `fairness {key, weight}` at admission (§22, docs/flow.md)."""

from __future__ import annotations

from anthares44.automation.errors import E_FLOW_KEY_INVALID
from anthares44.automation.runtime.engine import Engine
from tests.flow.flow_support import enqueue, limited, publish
from tests.store_queries import fetch


def test_a_higher_priority_goes_first_and_a_low_one_ages_instead_of_starving(store, clock, aio):
    ir = limited("prio", concurrency=[("'one'", 1, "workflow", False)], priority="input.p")
    aio(publish(store, ir))
    eng = Engine(store, clock=clock)
    (low,) = aio(enqueue(store, ir, "low", 1, p=9))
    (mid,) = aio(enqueue(store, ir, "mid", 1, p=5))
    (high,) = aio(enqueue(store, ir, "high", 1, p=1))
    order = []
    for _ in range(3):
        (row,) = aio(eng.claim(16))
        order.append(row["run_id"])
        assert aio(eng.drive_run(row)) == "succeeded"
    assert order == [high, mid, low]

    (old,) = aio(enqueue(store, ir, "old", 1, p=9))
    clock.advance(8 * 30)                       # 8 levels of aging: the 9 now ranks as a fresh 1
    fresh = aio(enqueue(store, ir, "fresh", 3, p=1))
    (row,) = aio(eng.claim(16))
    assert row["run_id"] == old and fresh


def test_weighted_fair_share_between_keys(store, clock, aio):
    ir = limited("weights", concurrency=[("'all'", 5, "project", False)],
                 fairness=("input.tenant", "input.tenant == 'pro' ? 4 : 1"))
    aio(publish(store, ir))
    aio(enqueue(store, ir, "free", 100))
    aio(enqueue(store, ir, "pro", 100))
    eng = Engine(store, clock=clock)
    got = {"free": 0, "pro": 0}
    for _ in range(10):                         # both backlogs last through these rounds
        rows = aio(eng.claim(16))
        assert len(rows) == 5
        for r in rows:
            got[r["input"]["tenant"]] += 1
            assert aio(eng.drive_run(r)) == "succeeded"
        clock.advance(0.2)
    assert got == {"free": 10, "pro": 40}


def test_a_priority_or_weight_that_is_not_valid_sends_the_run_to_the_dlq(store, clock, aio):
    ir = limited("badprio", priority="input.p", fairness=("input.tenant", "input.w"))
    aio(publish(store, ir))
    bad = aio(enqueue(store, ir, "a", 1, p="high", w=1)) + aio(enqueue(store, ir, "b", 1, p=12, w=1)) + \
        aio(enqueue(store, ir, "c", 1, p=1, w=0)) + aio(enqueue(store, ir, "d", 1, p=1, w=-3))
    (ok,) = aio(enqueue(store, ir, "e", 1, p=2, w=2.5))
    rows = aio(Engine(store, clock=clock).claim(16))
    assert [r["run_id"] for r in rows] == [ok]
    for run_id in bad:
        (got,) = aio(fetch(store, "flow_run_outcome", run_id=run_id))
        assert (got["state"], got["dlq_code"]) == ("cancelled", E_FLOW_KEY_INVALID), dict(got)
