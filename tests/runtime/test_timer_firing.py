"""Timers fired in sets (§19, docs/timers.md "Firing at volume", migration 0035): one statement fires the due
sleeps of runs no worker holds, as a visit would have (the attempt `succeeded` with {"due_at", "late_ms"}, one
`attempt.finished`), and leaves a held run, a sleep not yet due and a rescheduled one alone; several firing at once
fire each timer once; the daemon fires them while every claim slot is busy. Real PostgreSQL, a VirtualClock."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.engine.timer_firing import fire_due
from anthares44.automation.runtime.engine.timers import reschedule, wake
from tests.runtime.engine_support import PROJECT, Script, engine, node, publish_and_run, run_row, workflow
from tests.runtime.test_daemon_paths import _daemon
from tests.runtime.test_one_clock import _until

NAP = workflow([node("nap", sleep_ms=60_000), node("b", uses="pass", params={"output": 1})], name="nap")


async def sleeping(store, clock, n: int, name: str = "k") -> list[str]:
    """`n` runs of NAP with their sleeps open (due in 60 s) and released."""
    ir = NAP
    await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    runs = [(await store.create_run(PROJECT, ir.workflow_id, {}, f"{name}{i}")).run_id for i in range(n)]
    await engine(store, clock=clock, worker_id="opener").drive()
    return runs


async def naps(store, run_id: str) -> list[dict]:
    return [a for a in await store.list_attempts(run_id) if a["step_id"] == "nap"]


async def fired_events(store, run_id: str) -> list[dict]:
    return [e for e in await store.list_run_events(run_id)
            if e["kind"] == "attempt.finished" and e["step_id"] == "nap"]


def test_a_set_fire_fires_due_sleeps_of_released_runs_as_a_visit_would(store, clock, aio):
    """Due and released: fired, with the visit's result and event. Not due: left open. Held by a worker (its
    visit fires it): left open. Then the run's next step runs on the next claim."""
    due, later = aio(sleeping(store, clock, 2))
    aio(reschedule(store, PROJECT, later, "nap", until=clock.now() + timedelta(hours=1), by="u"))
    held = aio(publish_and_run(store, workflow([node("hold"), node("nap", sleep_ms=30_000)], edges=[], name="h"),
                               key="h"))
    s = Script(plan={"hold": ["block:go"]})
    holder = engine(store, s, clock=clock, worker_id="holder")

    async def scenario():
        visit = asyncio.create_task(holder.run_once())
        await _until(lambda: naps(store, held), "the holder opens the held run's sleep")
        clock.advance(61)
        n = await fire_due(store, clock.now())
        s.events["go"].set()
        await visit
        return n

    assert aio(scenario()) == 1
    (a,) = aio(naps(store, due))
    assert a["status"] == "succeeded" and a["finished_at"] == clock.now()
    assert a["result"] == {"due_at": a["due_at"].isoformat(), "late_ms": 1000}
    assert [e["status"] for e in aio(fired_events(store, due))] == ["succeeded"]
    assert [a["status"] for a in aio(naps(store, later))] == ["running"]
    assert aio(run_row(store, due))["state"] == "sleeping"           # due: the next claim runs `b`
    assert aio(engine(store, clock=clock).drive())[due] == "succeeded"
    assert [e["status"] for e in aio(fired_events(store, due))] == ["succeeded"]


def test_a_woken_sleep_fires_in_the_set_at_the_wake(store, clock, aio):
    (run_id,) = aio(sleeping(store, clock, 1))
    clock.advance(10)
    aio(wake(store, PROJECT, run_id, "nap", by="u", reason="now"))
    assert aio(fire_due(store, clock.now())) == 1
    (a,) = aio(naps(store, run_id))
    assert a["result"] == {"due_at": clock.now().isoformat(), "late_ms": 0}


def test_four_statements_firing_at_once_fire_each_timer_once(store, clock, aio):
    runs = aio(sleeping(store, clock, 200))
    clock.advance(61)

    async def at_once():
        return await asyncio.gather(*(fire_due(store, clock.now(), limit=150) for _ in range(4)))

    got = aio(at_once())
    assert sum(got) == 200
    assert aio(fire_due(store, clock.now())) == 0
    for run_id in runs:
        assert [e["status"] for e in aio(fired_events(store, run_id))] == ["succeeded"]


def test_the_daemon_fires_due_timers_while_every_claim_slot_is_busy(store, clock, aio):
    """One slot, held by a blocked step: the timers still fire at their instant (the set fire does not need a
    slot); their runs' next steps run once the slot frees."""
    s = Script(plan={"hold": ["block:go"]})

    async def scenario():
        runs = await sleeping(store, clock, 20)
        async with _daemon(store, clock, s, concurrency=1):
            # its timeout far past the jump: the slot stays busy while the timers come due
            blocked = await publish_and_run(store, workflow([node("hold", timeout_ms=3_600_000)], name="held"),
                                            key="b")
            await _until(lambda: _called(s, "hold"), "the daemon's one slot runs the blocked step")
            clock.advance(61)
            await _until(lambda: _all_fired(store, runs), "the timers fire while the slot is busy")
            assert (await run_row(store, blocked))["lease_owner"] == "d1" and s.called("hold") == 1
            s.events["go"].set()
            await _until(lambda: _all_done(store, runs + [blocked]), "every run finishes")
        for run_id in runs:
            assert [e["status"] for e in await fired_events(store, run_id)] == ["succeeded"]

    aio(scenario())


async def _called(script, step):
    return script.called(step) > 0


async def _all_fired(store, runs):
    for r in runs:
        if [a["status"] for a in await naps(store, r)] != ["succeeded"]:
            return False
    return True


async def _all_done(store, runs):
    for r in runs:
        if (await run_row(store, r))["state"] != "succeeded":
            return False
    return True
