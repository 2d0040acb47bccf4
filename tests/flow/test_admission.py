"""Per-key concurrency at admission (§22, docs/flow.md "Admission"): the claim counts live holders of each key in
the statement that grants, parks what is over, and a slot goes with the lease."""

from __future__ import annotations

from datetime import timedelta

from anthares44.automation.runtime.engine import Engine
from tests.flow.flow_support import enqueue, holders, limited, publish


def test_a_key_never_holds_more_than_its_limit_and_other_keys_go_on(store, clock, aio):
    ir = limited("tenants", concurrency=[("input.tenant", 2, "workflow", False)])
    aio(publish(store, ir))
    aio(enqueue(store, ir, "a", 6))
    aio(enqueue(store, ir, "b", 2))
    eng = Engine(store, clock=clock, concurrency=16)
    rows = aio(eng.claim(16))
    assert len(rows) == 4
    assert aio(holders(store)) == {"c:wf_tenants#0=a": 2, "c:wf_tenants#0=b": 2}
    for r in rows:
        aio(eng.drive_run(r))
    assert aio(holders(store)) == {}
    rows = aio(eng.claim(16))
    assert aio(holders(store)) == {"c:wf_tenants#0=a": 2}


def _outcome(store, aio, run_id):
    from tests.store_queries import fetch

    return dict(aio(fetch(store, "flow_run_outcome", run_id=run_id))[0])


def test_a_key_that_fails_or_is_null_sends_the_run_to_the_dlq_never_to_a_shared_bucket(store, clock, aio):
    from anthares44.automation.errors import E_FLOW_KEY_INVALID

    ir = limited("keys", concurrency=[("input.tenant", 1, "workflow", False)])
    aio(publish(store, ir))
    missing = aio(store.create_run("pj_default", ir.workflow_id, {"other": 1}, "no-tenant")).run_id
    null = aio(store.create_run("pj_default", ir.workflow_id, {"tenant": None}, "null-tenant")).run_id
    (good,) = aio(enqueue(store, ir, "a", 1))
    # the claim statement alone (another daemon's, between a creation and its keyer) grants no run without keys
    assert aio(store.fetch("lease_claim", worker_id="other", now=clock.now(), limit=16, lease=timedelta(seconds=30),
                           park_until=clock.now())) == []
    rows = aio(Engine(store, clock=clock).claim(16))
    assert [r["run_id"] for r in rows] == [good]
    for bad in (missing, null):
        got = _outcome(store, aio, bad)
        assert (got["state"], got["error_code"], got["dlq_code"]) == ("cancelled", E_FLOW_KEY_INVALID,
                                                                      E_FLOW_KEY_INVALID), got
        assert "concurrency[0].key `input.tenant`" in got["error_message"]


def test_past_max_live_keys_a_new_key_is_refused_and_known_keys_go_on(store, clock, aio):
    from anthares44.automation.errors import E_FLOW_KEYS_EXHAUSTED

    ir = limited("many", concurrency=[("input.tenant", 1, "workflow", False)])
    aio(publish(store, ir))
    eng = Engine(store, clock=clock)
    eng.flow.max_keys = 2
    first = aio(enqueue(store, ir, "a", 1)) + aio(enqueue(store, ir, "b", 1))
    assert len(aio(eng.claim(16))) == 2
    (third,) = aio(enqueue(store, ir, "c", 1))
    (again,) = aio(enqueue(store, ir, "a", 1, start=1))
    aio(eng.claim(16))
    got = _outcome(store, aio, third)
    assert (got["state"], got["dlq_code"]) == ("cancelled", E_FLOW_KEYS_EXHAUSTED), got
    assert _outcome(store, aio, again)["flow_keyed"] is True and first
    # the refusal raises an alert: the built-in DLQ-growth alert, naming the code
    from anthares44.automation.runtime.alerts.evaluator import Evaluator
    from tests.runtime.pg import query

    aio(Evaluator(store, holder="d1", interval_s=15).step())
    [(rule, context)] = query(store.url, "select rule, context from automation.alerts")
    assert rule == "builtin:dlq_growth" and E_FLOW_KEYS_EXHAUSTED in context


def test_two_daemons_never_grant_the_last_slot_twice(store, clock, aio):
    """Every claim is held at its end (run_events locked by another session) so that, without the claim lock,
    all of them would count the holders in the same snapshot; with it each one after the first counts the first's
    grants."""
    import asyncio

    import asyncpg

    ir = limited("last", concurrency=[("input.tenant", 3, "workflow", False)])
    aio(publish(store, ir))
    aio(enqueue(store, ir, "a", 40))
    engines = [Engine(store, clock=clock, worker_id=f"d{i}") for i in range(4)]
    aio(engines[0].flow.key_new())

    async def race():
        blocker = await asyncpg.connect(store.url)
        try:
            tr = blocker.transaction()
            await tr.start()
            await blocker.execute("lock table automation.run_events in exclusive mode")
            claims = [asyncio.ensure_future(e.claim(16)) for e in engines]
            await asyncio.sleep(0.5)            # every claim is in flight, none can have committed
            assert not any(c.done() for c in claims)
            await tr.rollback()
            return await asyncio.gather(*claims)
        finally:
            await blocker.close()

    got = aio(race())
    assert sum(len(g) for g in got) == 3
    assert aio(holders(store)) == {"c:wf_last#0=a": 3}


def test_an_expired_lease_keeps_its_slot_until_re_granted_then_new_runs_start(store, clock, aio):
    ir = limited("lease", concurrency=[("input.tenant", 2, "workflow", False)])
    aio(publish(store, ir))
    ids = aio(enqueue(store, ir, "a", 5))
    dead = Engine(store, clock=clock, worker_id="dead", lease=timedelta(seconds=10))
    held = aio(dead.claim(16))                  # this daemon dies holding both slots
    assert len(held) == 2
    alive = Engine(store, clock=clock, worker_id="alive", lease=timedelta(seconds=10))
    clock.advance(5)
    assert aio(alive.claim(16)) == []           # the lease is live: the slots stay with it
    clock.advance(6)
    again = aio(alive.claim(16))                # expired: the same two runs are re-granted, no third
    assert sorted(r["run_id"] for r in again) == sorted(r["run_id"] for r in held)
    assert all(r["prev_owner"] == "dead" for r in again)
    assert aio(holders(store)) == {"c:wf_lease#0=a": 2}
    for r in again:
        assert aio(alive.drive_run(r)) == "succeeded"
    nxt = aio(alive.claim(16))                  # the freed slots admit the next runs at once
    assert len(nxt) == 2 and {r["run_id"] for r in nxt} <= set(ids)
    assert aio(holders(store)) == {"c:wf_lease#0=a": 2}


def test_a_parked_run_frees_its_slot_unless_hold_while_waiting(store, clock, aio):
    from tests.runtime.engine_support import node

    steps = [node("nap", sleep_ms=60_000), node("b", uses="pass", params={})]
    free = limited("napfree", concurrency=[("input.tenant", 1, "workflow", False)], nodes=steps)
    hold = limited("naphold", concurrency=[("input.tenant", 1, "workflow", True)], nodes=steps)
    for ir, tenant in ((free, "a"), (hold, "h")):
        aio(publish(store, ir))
        aio(enqueue(store, ir, tenant, 2))
    eng = Engine(store, clock=clock)
    for r in aio(eng.claim(16)):                # one run of each: both go to sleep for a minute
        assert aio(eng.drive_run(r)) == "sleeping"
    # the free one let its slot go as it parked: its second run starts; the holding one's waits
    second = aio(eng.claim(16))
    assert [r["workflow_id"] for r in second] == ["wf_napfree"]
    assert aio(holders(store)) == {"c:wf_napfree#0=a": 1, "c:wf_naphold#0=h": 1}


def test_rate_limit_skips_with_why_and_throttle_delays_to_the_next_token(store, clock, aio):
    from anthares44.automation.errors import E_FLOW_RATE_LIMITED

    rated = limited("rated", rate=("input.tenant", 2, 3_600_000, 1))
    aio(publish(store, rated))
    ids = aio(enqueue(store, rated, "a", 3))
    eng = Engine(store, clock=clock)
    assert len(aio(eng.claim(16))) == 2
    got = _outcome(store, aio, ids[2])
    assert (got["state"], got["error_code"]) == ("cancelled", E_FLOW_RATE_LIMITED)
    assert "skipped: rateLimit r:wf_rated=a allows 2 per 3600 s" in got["error_message"]

    slow = limited("slow", throttle=("input.tenant", 2, 1_000, 1))     # 2 per second, burst 1
    aio(publish(store, slow))
    tids = aio(enqueue(store, slow, "t", 4))
    t0 = clock.now()
    assert len(aio(eng.claim(16))) == 1         # the burst: one token
    waiting = _outcome(store, aio, tids[1])
    assert waiting["state"] == "pending" and waiting["next_wake_at"] == t0 + timedelta(milliseconds=500)
    # due exactly at the next token's instant
    clock.advance(0.5)
    assert len(aio(eng.claim(16))) == 1
    clock.advance(0.5)
    assert len(aio(eng.claim(16))) == 1
    assert [_outcome(store, aio, t)["state"] for t in tids].count("cancelled") == 0      # never dropped
