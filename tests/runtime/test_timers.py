"""Durable timers in the engine (§19, docs/timers.md): a sleep's due instant is computed once when it opens and
stored on its attempt; the run sleeps released until then and fires once, recording how late; bad instants fail at
once; a person wakes or reschedules a sleep in one conditional statement. Real PostgreSQL, a VirtualClock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from anthares44.automation.calendar import Span, due_for
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.engine.timers import reschedule, wake
from tests.partitions.support import compile_yaml, publish
from tests.runtime.engine_support import PROJECT, Script, engine, node, publish_and_run, run_row, workflow

MONTH = """\
name: renewal
version: 1
maxDuration: 40d
steps:
  - id: charge
    uses: pass
    timeout: 15s
  - id: next-cycle
    sleep: {for: 1mo, tz: America/Sao_Paulo}
  - id: report
    uses: pass
    timeout: 15s
"""

UNTIL = """\
name: launch
version: 1
steps:
  - id: launch
    sleep: {until: "{{ input.launchAt }}"}
  - id: report
    uses: pass
    timeout: 15s
"""


async def start(store, ir, key: str = "k1", input=None) -> str:
    created = await store.create_run(PROJECT, ir.workflow_id, input or {}, key)
    return created.run_id


async def sleep_attempts(store, run_id: str, step: str) -> list[dict]:
    return [a for a in await store.list_attempts(run_id) if a["step_id"] == step]


async def due_now(store, run_id: str) -> None:
    async with store.connection("test_due_now") as conn:
        await conn.execute("update automation.runs set next_wake_at = $2 where run_id = $1", run_id, store.clock.now())


async def events(store, run_id: str, kind: str) -> list[dict]:
    return [e for e in await store.list_run_events(run_id) if e["kind"] == kind]


def test_a_month_in_a_zone_is_stored_when_the_sleep_opens_and_fires_then(store, clock, aio, tmp_path):
    ir = compile_yaml(tmp_path, MONTH)
    aio(publish(store, ir))
    run_id = aio(start(store, ir))
    eng = engine(store, clock=clock)
    opened = clock.now()
    assert aio(eng.drive()) == {run_id: "sleeping"}
    due = due_for(opened, Span(months=1), "America/Sao_Paulo")
    (a,) = aio(sleep_attempts(store, run_id, "next-cycle"))
    assert (a["status"], a["due_at"]) == ("running", due)
    run = aio(run_row(store, run_id))
    assert run["next_wake_at"] == due and run["lease_owner"] is None
    assert run["due_at"] == due and run["timer_steps"] == ["next-cycle"]
    assert run["deadline_at"] == run["created_at"] + timedelta(days=40)     # maxDuration, not 72 h

    clock.set(due - timedelta(seconds=1))
    assert aio(eng.drive()) == {}
    clock.set(due + timedelta(milliseconds=250))
    assert aio(eng.drive()) == {run_id: "succeeded"}
    (a,) = aio(sleep_attempts(store, run_id, "next-cycle"))
    assert a["status"] == "succeeded" and a["result"] == {"due_at": due.isoformat(), "late_ms": 250}


def test_a_restart_and_a_new_look_never_recompute_the_instant(store, clock, aio, tmp_path):
    """A new engine (a restart) looking at the run days later reads the stored instant back: the sleep does not
    end at once, nor a month after that look."""
    ir = compile_yaml(tmp_path, MONTH)
    aio(publish(store, ir))
    run_id = aio(start(store, ir))
    opened = clock.now()
    assert aio(engine(store, clock=clock).drive()) == {run_id: "sleeping"}
    due = due_for(opened, Span(months=1), "America/Sao_Paulo")
    clock.advance(timedelta(days=10))
    aio(due_now(store, run_id))       # a spurious wake-up (a daemon's look after a restart)
    again = engine(store, clock=clock, worker_id="w2")
    assert aio(again.drive()) == {run_id: "sleeping"}
    assert aio(run_row(store, run_id))["next_wake_at"] == due
    clock.set(due)
    assert aio(again.drive()) == {run_id: "succeeded"}


def test_a_past_until_fires_at_once_and_records_how_late(store, clock, aio, tmp_path):
    ir = compile_yaml(tmp_path, UNTIL)
    aio(publish(store, ir))
    at = (clock.now() - timedelta(hours=1)).astimezone(UTC)
    run_id = aio(start(store, ir, input={"launchAt": at.isoformat().replace("+00:00", "-00:00")}))
    assert aio(engine(store, clock=clock).drive()) == {run_id: "succeeded"}
    (a,) = aio(sleep_attempts(store, run_id, "launch"))
    assert a["result"] == {"due_at": at.isoformat(), "late_ms": 3_600_000}


def test_a_templated_until_with_an_offset_sleeps_until_that_instant(store, clock, aio, tmp_path):
    ir = compile_yaml(tmp_path, UNTIL)
    aio(publish(store, ir))
    at = clock.now() + timedelta(hours=5)
    text = at.astimezone(datetime.now().astimezone().tzinfo).isoformat()
    run_id = aio(start(store, ir, input={"launchAt": text}))
    assert aio(engine(store, clock=clock).drive()) == {run_id: "sleeping"}
    assert aio(run_row(store, run_id))["due_at"] == at


@pytest.mark.parametrize("value", ["2026-07-01T09:00:00", "next tuesday", 42])
def test_a_templated_until_without_an_offset_fails_with_E_SLEEP_INVALID(store, clock, aio, tmp_path, value):
    ir = compile_yaml(tmp_path, UNTIL)
    aio(publish(store, ir))
    run_id = aio(start(store, ir, input={"launchAt": value}))
    assert aio(engine(store, clock=clock).drive()) == {run_id: "failed"}
    run = aio(run_row(store, run_id))
    assert (run["error_code"], run["failed_step"]) == ("E_SLEEP_INVALID", "launch")
    assert [a["status"] for a in aio(sleep_attempts(store, run_id, "launch"))] == ["failed"]   # never retried


def test_an_until_past_the_run_deadline_fails_at_once(store, clock, aio, tmp_path):
    ir = compile_yaml(tmp_path, UNTIL)
    aio(publish(store, ir))
    run_id = aio(start(store, ir, input={"launchAt": (clock.now() + timedelta(days=4)).isoformat()}))
    assert aio(engine(store, clock=clock).drive()) == {run_id: "failed"}
    run = aio(run_row(store, run_id))
    assert (run["error_code"], run["failed_step"]) == ("E_SLEEP_EXCEEDS_RUN_DEADLINE", "launch")


def test_two_engines_on_one_clock_fire_each_timer_once(store, clock, aio):
    ir = workflow([node("nap", sleep_ms=60_000), node("b", uses="pass", params={"output": 1})])
    aio(publish(store, ir))
    runs = [aio(start(store, ir, key=f"k{i}")) for i in range(40)]
    one, two = engine(store, clock=clock, worker_id="w1"), engine(store, clock=clock, worker_id="w2")
    aio(one.drive())
    clock.advance(60)

    async def both():
        return await asyncio.gather(one.drive(), two.drive())

    a, b = aio(both())
    assert set(a) | set(b) == set(runs)
    for run_id in runs:
        assert aio(run_row(store, run_id))["state"] == "succeeded"
        fired = [e for e in aio(events(store, run_id, "attempt.finished")) if e["step_id"] == "nap"]
        assert [e["status"] for e in fired] == ["succeeded"]


def test_wake_ends_a_sleep_now_and_is_audited(store, clock, aio, tmp_path):
    ir = compile_yaml(tmp_path, MONTH)
    aio(publish(store, ir))
    run_id = aio(start(store, ir))
    eng = engine(store, clock=clock)
    aio(eng.drive())
    clock.advance(3600)
    woke = aio(wake(store, PROJECT, run_id, "next-cycle", by="user:ana", reason="customer asked"))
    assert woke["due_at"] == clock.now()
    assert aio(eng.drive()) == {run_id: "succeeded"}
    (a,) = aio(sleep_attempts(store, run_id, "next-cycle"))
    assert a["result"]["due_at"] == clock.now().isoformat()
    (ev,) = aio(events(store, run_id, "timer.woken"))
    assert (ev["step_id"], ev["data"]["by"], ev["data"]["reason"]) == ("next-cycle", "user:ana", "customer asked")
    with pytest.raises(A44Error) as err:        # fired: nothing to wake any more
        aio(wake(store, PROJECT, run_id, "next-cycle", by="user:ana", reason="again"))
    assert err.value.code == "E_TIMER_NOT_SLEEPING"
    with pytest.raises(A44Error) as err:
        aio(wake(store, PROJECT, run_id, "charge", by="user:ana", reason="not a sleep"))
    assert err.value.code == "E_TIMER_NOT_SLEEPING"


def test_a_due_timer_refuses_a_wake_or_reschedule_exactly_one_outcome(store, clock, aio):
    """The timer's instant has come (no daemon looked yet): it is the outcome; a wake or reschedule now would be
    a second one and is refused."""
    ir = workflow([node("nap", sleep_ms=30_000)])
    run_id = aio(publish_and_run(store, ir))
    eng = engine(store, clock=clock)
    aio(eng.drive())
    clock.advance(30)
    for move in (lambda: wake(store, PROJECT, run_id, "nap", by="u", reason="r"),
                 lambda: reschedule(store, PROJECT, run_id, "nap", until=clock.now() + timedelta(hours=1), by="u")):
        with pytest.raises(A44Error) as err:
            aio(move())
        assert err.value.code == "E_TIMER_NOT_SLEEPING"
    assert aio(eng.drive()) == {run_id: "succeeded"}
    (a,) = aio(sleep_attempts(store, run_id, "nap"))
    assert a["result"]["late_ms"] == 0


def test_reschedule_moves_the_instant_and_refuses_one_past_the_deadline(store, clock, aio):
    ir = workflow([node("nap", sleep_ms=60_000), node("b", uses="pass", params={"output": 1})])
    run_id = aio(publish_and_run(store, ir))
    eng = engine(store, clock=clock)
    aio(eng.drive())
    later = clock.now() + timedelta(hours=2)
    aio(reschedule(store, PROJECT, run_id, "nap", until=later.isoformat(), by="user:ana", reason="maintenance"))
    clock.advance(61)
    assert aio(eng.drive()) == {run_id: "sleeping"}      # woke at the old instant, found the new one, sleeps on
    assert aio(run_row(store, run_id))["next_wake_at"] == later
    with pytest.raises(A44Error) as err:
        aio(reschedule(store, PROJECT, run_id, "nap", until=clock.now() + timedelta(days=5), by="u"))
    assert err.value.code == "E_SLEEP_EXCEEDS_RUN_DEADLINE"
    with pytest.raises(A44Error) as err:
        aio(reschedule(store, PROJECT, run_id, "nap", until="2026-07-01T09:00:00", by="u"))
    assert err.value.code == "E_INVALID_ARGUMENT"
    clock.set(later)
    assert aio(eng.drive()) == {run_id: "succeeded"}
    (ev,) = aio(events(store, run_id, "timer.rescheduled"))
    assert ev["data"]["reason"] == "maintenance"


def _while_leased(store, clock, aio, meanwhile) -> tuple[str, dict]:
    """`slow` (blocks until released) beside `nap` (30 s): a visit holds the run with its sleep open while
    `meanwhile(run_id)` runs. Returns the run and how the visit ended."""
    s = Script(plan={"slow": ["block:go", "ok"]})
    run_id = aio(publish_and_run(store, workflow([node("slow"), node("nap", sleep_ms=30_000)], edges=[])))
    eng = engine(store, s, clock=clock)

    async def scenario():
        visit = asyncio.create_task(eng.run_once())
        while not s.called("slow") or not await sleep_attempts(store, run_id, "nap"):
            await asyncio.sleep(0.01)
        await meanwhile(run_id)
        s.events["go"].set()
        return await visit

    return run_id, aio(scenario())


def test_a_wake_while_the_run_is_leased_is_found_when_the_visit_releases(store, clock, aio):
    async def woken(run_id):
        await wake(store, PROJECT, run_id, "nap", by="u", reason="now")

    run_id, _ = _while_leased(store, clock, aio, woken)
    assert aio(engine(store, clock=clock).drive()).get(run_id, "succeeded") == "succeeded"   # due now, not in 30 s
    assert aio(run_row(store, run_id))["state"] == "succeeded"


def test_a_reschedule_committed_between_the_fires_read_and_its_commit_wins(store, clock, aio):
    """The visit read instant D and fires at D; a reschedule to D2 committed meanwhile: the fire writes nothing
    (its instant is not the stored one), and the sleep ends once, at D2."""
    later = clock.now() + timedelta(minutes=10)

    async def moved(run_id):
        await reschedule(store, PROJECT, run_id, "nap", until=later, by="u")
        clock.advance(31)          # the visit's alarm for D rings while the run is still leased

    run_id, outcome = _while_leased(store, clock, aio, moved)
    assert outcome == {run_id: "lost"}
    eng = engine(store, Script(plan={"slow": ["ok"]}), clock=clock)
    clock.advance(30)              # the lease expires; the next claim reads D2 and sleeps on
    assert aio(eng.drive()) == {run_id: "sleeping"}
    clock.set(later)
    aio(eng.drive())
    assert aio(run_row(store, run_id))["state"] == "succeeded"
    (a,) = aio(sleep_attempts(store, run_id, "nap"))
    assert a["result"]["late_ms"] == 0 and a["due_at"] == a["finished_at"]


def test_cancel_stops_a_sleeping_run_at_once(store, clock, aio):
    from anthares44.automation.runtime.engine.cancels import cancel

    run_id = aio(publish_and_run(store, workflow([node("nap", sleep_ms=3_600_000)])))
    aio(engine(store, clock=clock).drive())
    assert aio(cancel(store, PROJECT, run_id, by="u"))["outcome"] == "cancelled"
    run = aio(run_row(store, run_id))
    assert run["state"] == "cancelled" and run["timer_steps"] == [] and run["due_at"] is None
    assert [a["status"] for a in aio(sleep_attempts(store, run_id, "nap"))] == ["cancelled"]


def test_the_lateness_histogram_counts_fired_timers(store, clock, aio):
    from anthares44.automation.app.metrics import collect

    run_id = aio(publish_and_run(store, workflow([node("nap", sleep_ms=10_000)])))
    eng = engine(store, clock=clock)
    aio(eng.drive())
    clock.advance(13)           # 3 s late
    assert aio(eng.drive()) == {run_id: "succeeded"}
    (fam,) = [f for f in aio(collect(store)) if f.name == "automation_timer_lateness_seconds"]
    samples = {(n, s.get("le")): v for n, s, v in fam.samples}
    assert samples[("automation_timer_lateness_seconds_count", None)] == 1
    assert samples[("automation_timer_lateness_seconds_bucket", "2.0")] == 0
    assert samples[("automation_timer_lateness_seconds_bucket", "5.0")] == 1
    assert samples[("automation_timer_lateness_seconds_sum", None)] == 3


def test_a_replay_reuses_the_sleep_with_its_stored_instant(store, clock, aio):
    """A replay from the step after the sleep carries the sleep over with the instant it fired at: it does not
    sleep again, nor is its instant recomputed."""
    from anthares44.automation.app.automation import Automation
    from anthares44.automation.app.replay import replay

    s = Script(plan={"b": ["perm", "ok"]})
    run_id = aio(publish_and_run(store, workflow([node("nap", sleep_ms=60_000), node("b")])))
    eng = engine(store, s, clock=clock)
    aio(eng.drive())
    clock.advance(60)
    assert aio(eng.drive()) == {run_id: "failed"}
    (fired,) = aio(sleep_attempts(store, run_id, "nap"))
    clock.advance(3600)
    aio(replay(Automation(store, PROJECT), run_ids=[run_id], from_step="b", dry_run=False))
    assert aio(eng.drive()) == {run_id: "succeeded"}
    reused = [a for a in aio(sleep_attempts(store, run_id, "nap")) if a["epoch"] == 1]
    assert [(a["worker_id"], a["due_at"], a["result"]) for a in reused] == [("reused", fired["due_at"],
                                                                             fired["result"])]
