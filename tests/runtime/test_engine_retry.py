"""Retries (§3.2, §6.3) as due times in the database: full-jitter bounds from the injected RNG, the lease
released while waiting, open circuits not spending budget, exhausted budgets."""

import random
from datetime import timedelta

from tests.runtime.engine_support import Script, attempts, engine, node, publish_and_run, run_row, workflow


def test_retry_delays_are_full_jitter_due_times_with_no_lease_held(store, clock, aio):
    s = Script(plan={"a": ["retry", "retry", "retry", "ok"]})
    run_id = aio(publish_and_run(store, workflow([node("a", retry=(5, "exponential-jitter"), base_ms=1000,
                                                       cap_ms=3000)])))
    eng = engine(store, s, clock=clock, seed=42)
    expected = random.Random(42)
    for n in (1, 2, 3):
        assert aio(eng.drive()) == {run_id: "waiting"}
        run = aio(run_row(store, run_id))
        assert run["state"] == "waiting" and run["lease_owner"] is None   # holds no worker
        delay = (run["next_wake_at"] - clock.now()).total_seconds() * 1000
        ceiling = min(1000 * 2 ** (n - 1), 3000)
        assert 0 <= delay <= ceiling
        assert abs(delay - expected.uniform(0, ceiling)) < 1       # drawn from the injected RNG
        assert aio(eng.drive()) == {}                                # not due yet: nothing runs
        clock.set(run["next_wake_at"])
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert [a[3] for a in aio(attempts(store, run_id))] == ["failed", "failed", "failed", "succeeded"]


def test_exhausted_budget_fails_after_max_plus_one_attempts(store, clock, aio):
    s = Script(plan={"a": ["retry"] * 5})
    run_id = aio(publish_and_run(store, workflow([node("a", retry=(2, "fixed"), base_ms=500)])))
    eng = engine(store, s, clock=clock)
    for _ in range(5):
        aio(eng.drive())
        clock.advance(1)
    run = aio(run_row(store, run_id))
    assert (run["state"], run["error_code"]) == ("failed", "E_UPSTREAM_503")
    assert s.called("a") == 3


def test_open_circuit_does_not_spend_retry_budget_and_retry_after_wins(store, clock, aio):
    s = Script(plan={"a": ["circuit", "circuit", "retry", "ok"]})
    run_id = aio(publish_and_run(store, workflow([node("a", retry=(1, "fixed"), base_ms=700)])))
    eng = engine(store, s, clock=clock)
    for _ in range(6):
        aio(eng.drive())
        clock.advance(1)
    assert aio(run_row(store, run_id))["state"] == "succeeded"
    assert s.called("a") == 4


def test_retry_after_overrides_the_backoff(store, clock, aio):
    from anthares44.automation.errors import A44Error

    class RateLimited(Script):
        async def invoke(self, params, ctx):
            if ctx.attempt == 1:
                raise A44Error("E_UPSTREAM_429", "slow down", details={"retry_after_ms": 12_000})
            return {"ok": True}

    run_id = aio(publish_and_run(store, workflow([node("a", retry=(3, "exponential-jitter"))])))
    eng = engine(store, RateLimited(), clock=clock)
    aio(eng.drive())
    assert aio(run_row(store, run_id))["next_wake_at"] == clock.now() + timedelta(seconds=12)
    clock.advance(12)
    assert aio(eng.drive()) == {run_id: "succeeded"}
