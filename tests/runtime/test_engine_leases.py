"""Leases (§7.2, §7.3) in one process with a ManualClock: disjoint claims, a dead worker's step re-granted with
attempt + 1 and counted, a zombie's late write refused, renewal, exclusive steps parked until a person resolves
them, and the state machine refusing illegal transitions."""

import asyncio
from datetime import timedelta

import pytest

from anthares44.automation.clock import VirtualClock
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.engine import resolve_confirmation
from anthares44.automation.runtime.engine.journal import Batch, Lease
from tests.runtime.engine_support import (
    Script,
    attempts,
    engine,
    node,
    publish_and_run,
    run_row,
    state_changes,
    workflow,
)


async def _start_and_die(eng, script: Script, step: str):
    """Drive until `step` is in flight, then kill the driver (its attempt row stays `running`)."""
    task = asyncio.create_task(eng.run_once())
    while not script.called(step):
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_two_engines_never_claim_the_same_run(store, clock, aio):
    ir = workflow([node("a", uses="pass", params={"output": 1})])
    for i in range(30):
        aio(publish_and_run(store, ir, key=f"k{i}"))
    e1, e2 = engine(store, clock=clock, worker_id="w1"), engine(store, clock=clock, worker_id="w2")

    async def both():
        return await asyncio.gather(e1.claim(20), e2.claim(20))

    r1, r2 = aio(both())
    ids1, ids2 = {r["run_id"] for r in r1}, {r["run_id"] for r in r2}
    assert not ids1 & ids2 and len(ids1 | ids2) == 30


def test_a_dead_workers_step_is_granted_again_with_attempt_plus_one(store, clock, aio):
    s = Script(plan={"a": ["block:never"]})
    run_id = aio(publish_and_run(store, workflow([node("a"), node("b")])))
    dead = engine(store, s, clock=clock, worker_id="dead")
    aio(_start_and_die(dead, s, "a"))
    other = engine(store, s, clock=clock, worker_id="other")
    assert aio(other.drive()) == {}                       # lease still valid: nobody takes it
    clock.advance(31)
    assert aio(other.drive()) == {run_id: "succeeded"}
    assert [a for a in aio(attempts(store, run_id)) if a[0] == "a"] == [
        ("a", "action", 1, "lease_expired", "E_LEASE_EXPIRED"),
                                                ("a", "action", 2, "succeeded", None)]
    assert {c[3] for c in s.calls if c[0] == "a"} == {f"{run_id}:a"}     # same key on both attempts
    assert aio(run_row(store, run_id))["lease_reclaims"] == 1
    assert other.metrics["lease_reclaim_total"] == 1
    assert aio(store.fetchval("lease_reclaim_total", project=None)) == 1


def test_a_zombie_cannot_record_after_its_lease_was_regranted(store, clock, aio):
    s = Script(plan={"a": ["block:go", "ok"]})
    run_id = aio(publish_and_run(store, workflow([node("a")])))
    # a stalled process: its clock, and so its lease renewal (interpreter.py), stands still while the world's moves
    zombie = engine(store, s, clock=VirtualClock(clock.now()), worker_id="zombie")
    other = engine(store, s, clock=clock, worker_id="other")

    async def scenario():
        z = asyncio.create_task(zombie.run_once())
        while not s.called("a"):
            await asyncio.sleep(0.01)
        clock.advance(31)
        assert await other.drive() == {run_id: "succeeded"}
        s.events["go"].set()                               # the zombie's call returns now
        return await z

    assert aio(scenario()) == {run_id: "lost"}
    assert [a[3] for a in aio(attempts(store, run_id))] == ["lease_expired", "succeeded"]


def test_renewal_keeps_the_lease_while_a_step_runs(store, clock, aio):
    s = Script(plan={"a": ["block:go"]})
    run_id = aio(publish_and_run(store, workflow([node("a")])))
    holder = engine(store, s, clock=clock, worker_id="holder", lease_s=0.3)   # renews every 0.1 s
    other = engine(store, s, clock=clock, worker_id="other", lease_s=0.3)

    async def renewed_at_now() -> None:
        """Until the holder's renewal for the clock's instant is recorded (its deadline a lease from now): the
        test waits on the engine, not on wall time, so a loaded machine cannot make it miss a renewal."""
        want = clock.now() + timedelta(seconds=0.3)
        for _ in range(3000):
            if (await store.get_run(run_id))["lease_deadline"] >= want:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"no renewal for {clock.now().isoformat()} within 30 s")

    async def scenario():
        h = asyncio.create_task(holder.run_once())
        while not s.called("a"):
            await asyncio.sleep(0.01)
        for _ in range(5):
            clock.advance(0.1)             # a renewal is due now (every lease/3 of the engine's clock)
            await renewed_at_now()
            assert await other.claim() == []
        s.events["go"].set()
        return await h

    assert aio(scenario()) == {run_id: "succeeded"}
    assert aio(run_row(store, run_id))["lease_reclaims"] == 0


def test_the_engines_clock_drives_the_renewal(store, clock, aio):
    """The renewal waits on the engine's clock (lease/3 of it): moving the virtual clock past the lease, in steps,
    keeps a live holder's lease however little wall time passes; nobody else may claim the run meanwhile."""
    s = Script(plan={"a": ["block:go"]})
    run_id = aio(publish_and_run(store, workflow([node("a")])))
    holder = engine(store, s, clock=clock, worker_id="holder")      # lease 30 s: renewed every 10 s of the clock
    other = engine(store, s, clock=clock, worker_id="other")

    async def scenario():
        h = asyncio.create_task(holder.run_once())
        while not s.called("a"):
            await asyncio.sleep(0.01)
        for _ in range(3):                               # 60 s of the clock in all: twice the lease
            clock.advance(20)
            renewed = clock.now() + timedelta(seconds=30)
            async with asyncio.timeout(10):              # the renewal the clock rang lands
                while (await run_row(store, run_id))["lease_deadline"] != renewed:
                    await asyncio.sleep(0.01)
            assert await other.claim() == []
        s.events["go"].set()
        return await h

    assert aio(scenario()) == {run_id: "succeeded"}
    assert aio(run_row(store, run_id))["lease_reclaims"] == 0


@pytest.mark.parametrize("outcome,final,a_calls", [("succeeded", "succeeded", 1), ("failed", "failed", 1),
                                                    ("retry", "succeeded", 2)])
def test_exclusive_step_parks_until_a_person_resolves_it(store, clock, aio, outcome, final, a_calls):
    s = Script(plan={"pay": ["block:never", "ok"]})
    run_id = aio(publish_and_run(store, workflow([node("pay", exclusive=True), node("after")])))
    aio(_start_and_die(engine(store, s, clock=clock, worker_id="dead"), s, "pay"))
    clock.advance(31)
    eng = engine(store, s, clock=clock, worker_id="w2")
    assert aio(eng.drive()) == {run_id: "awaiting_confirmation"}
    run = aio(run_row(store, run_id))
    assert (run["current_step"], run["error_code"], run["next_wake_at"]) == ("pay", "E_EXCLUSIVE_UNCONFIRMED", None)
    assert any(e["kind"] == "alert" for e in aio(store.list_run_events(run_id)))
    clock.advance(3600)
    assert aio(eng.drive()) == {}                         # parked: never re-granted on its own
    assert s.called("pay") == 1
    with pytest.raises(A44Error) as exc:
        aio(resolve_confirmation(store, run_id, "after", outcome))
    assert exc.value.code == "E_ILLEGAL_TRANSITION"
    aio(resolve_confirmation(store, run_id, "pay", outcome, by="ops@example"))
    assert aio(eng.drive()) == {run_id: final}
    assert s.called("pay") == a_calls
    assert s.called("after") == (1 if final == "succeeded" else 0)
    if outcome == "failed":
        assert aio(run_row(store, run_id))["error_code"] == "E_CONFIRMED_FAILED"
    assert ("awaiting_confirmation", "pending") in aio(state_changes(store, run_id))


def test_a_confirmation_with_an_unknown_outcome_or_run_is_refused(store, aio):
    with pytest.raises(A44Error) as bad:
        aio(resolve_confirmation(store, "run_01KXXAYDNR0000000000000000", "pay", "maybe"))
    assert bad.value.code == "E_PARAMS_INVALID" and "succeeded, failed, retry" in bad.value.message
    with pytest.raises(A44Error) as missing:
        aio(resolve_confirmation(store, "run_01KXXAYDNR0000000000000000", "pay", "retry"))
    assert missing.value.code == "E_RUN_NOT_FOUND"


def test_illegal_transitions_are_refused_and_change_nothing(store, clock, aio):
    run_id = aio(publish_and_run(store, workflow([node("a")])))
    eng = engine(store, clock=clock)
    (row,) = aio(eng.claim())
    lease = Lease(run_id, row["project_id"], row["workflow_id"], eng.worker_id, row["lease_grants"], row["epoch"])
    b = Batch(store, lease, eng.worker_id)
    b.transition("compensation_failed", clock.now())     # running -> compensation_failed is not allowed
    with pytest.raises(A44Error) as exc:
        aio(b.commit(clock.now()))
    assert exc.value.code == "E_ILLEGAL_TRANSITION" and exc.value.details == {
        "from": "running", "to": "compensation_failed", "run_id": run_id}
    assert aio(run_row(store, run_id))["state"] == "running"
    with pytest.raises(A44Error) as exc:
        aio(resolve_confirmation(store, run_id, "a", "retry"))
    assert exc.value.code == "E_ILLEGAL_TRANSITION"


def test_the_claims_planner_settings_end_with_its_statement(store, clock, aio):
    """lease_claim (0027) plans its statement with enable_sort off and a generic plan; a caller's own settings
    are back as they were once it returns, even inside the caller's transaction. The earliest due runs go first."""
    from datetime import timedelta

    ir = workflow([node("a", uses="pass", params={"output": 1})])
    ids = []
    for i in range(3):
        ids.append(aio(publish_and_run(store, ir, key=f"k{i}")))
        clock.advance(1)

    async def claim_in_a_transaction():
        async with store.connection("test") as c:
            async with c.transaction():
                await c.execute("set local plan_cache_mode = force_custom_plan")
                now = clock.now()
                rows = await c.fetch("select * from automation.lease_claim($1, $2, $3, $4, $5)", "w1", now, 2,
                                     timedelta(seconds=30), now + timedelta(seconds=60))
                return ({r["run_id"] for r in rows}, await c.fetchval("select current_setting('enable_sort')"),
                        await c.fetchval("select current_setting('plan_cache_mode')"))

    assert aio(claim_in_a_transaction()) == ({ids[0], ids[1]}, "on", "force_custom_plan")
