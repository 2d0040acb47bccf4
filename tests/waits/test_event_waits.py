"""`wait: {event, correlate, if, since}` (§20, docs/waits.md "Event waits") on the real engine and PostgreSQL with
a ManualClock: each interleaving of an event with its run (before the run, before the open, between the open and
the release, after the release, against the timeout, against a cancel) ends with exactly one outcome, the event
in the wait when `since` admits it; correlation keeps runs apart; one event may satisfy many runs, never one
wait twice; an `if` that refuses or fails is a non-match, counted."""

from __future__ import annotations

from datetime import timedelta

from anthares44.automation.runtime.engine import strategies
from anthares44.automation.runtime.engine.waits import Wait
from anthares44.automation.runtime.ingestion.metrics import COUNTERS
from tests.runtime.engine_support import Script, attempts, engine, run_row
from tests.waits.event_support import (
    event_waits,
    event_workflow,
    output,
    pay,
    publish,
    start,
    waits,
)


def test_an_event_published_after_the_run_and_before_the_open_is_the_waits_output(store, clock, aio):
    ir = event_workflow()
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_1"))
    clock.advance(1)
    event_id = aio(pay(store, "inv_1", amountCents=500))
    assert aio(engine(store, Script(), clock=clock).drive()) == {run_id: "succeeded"}
    got = aio(output(store, run_id))
    assert got["kind"] == "event" and got["event"]["id"] == event_id
    assert got["event"]["data"] == {"invoiceId": "inv_1", "amountCents": 500}
    [w] = aio(waits(store, run_id))
    assert (w["kind"], w["key"], w["state"], w["satisfied_by"]) == ("event", "billing.payment.received",
                                                                     "satisfied", f"event:{event_id}")


def test_with_since_run_start_an_event_before_the_run_is_not_matched_and_is_counted(store, clock, aio):
    ir = event_workflow(timeout="1h", on_timeout="continue")
    aio(publish(store, ir))
    aio(pay(store, "inv_2", key="early"))
    clock.advance(1)
    run_id = aio(start(store, ir, "inv_2"))
    before = COUNTERS.get("wait_event_before_since_total")
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    [ew] = aio(event_waits(store, run_id))
    assert ew["before_since"] == 1 and ew["value"] == "inv_2"
    assert COUNTERS.get("wait_event_before_since_total") == before + 1
    clock.advance(1)
    late = aio(pay(store, "inv_2", key="late"))             # after the run: always matched
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id))["event"]["id"] == late


def test_with_a_lookback_an_event_before_the_run_is_matched(store, clock, aio):
    ir = event_workflow(since="-1m")
    aio(publish(store, ir))
    event_id = aio(pay(store, "inv_3"))
    clock.advance(30)
    run_id = aio(start(store, ir, "inv_3"))
    assert aio(engine(store, Script(), clock=clock).drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id))["event"]["id"] == event_id


def test_a_lookback_does_not_reach_an_event_older_than_it(store, clock, aio):
    ir = event_workflow(since="-1m", timeout="10s", on_timeout="continue")
    aio(publish(store, ir))
    aio(pay(store, "inv_4"))
    clock.advance(61)
    run_id = aio(start(store, ir, "inv_4"))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    clock.advance(10)
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id)) == {"kind": "timeout"}


def test_since_wait_open_takes_only_events_after_the_wait_opened(store, clock, aio):
    ir = event_workflow(since="wait_open")
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_5"))
    aio(pay(store, "inv_5", key="before-open"))             # after the run, before its wait opened
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    after = aio(pay(store, "inv_5", key="after-open"))
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id))["event"]["id"] == after


def test_an_event_while_the_run_waits_wakes_it(store, clock, aio):
    ir = event_workflow(timeout="1h")
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_6"))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    assert aio(run_row(store, run_id))["next_wake_at"] == clock.now() + timedelta(hours=1)
    clock.advance(5)
    aio(pay(store, "inv_6"))
    assert aio(run_row(store, run_id))["next_wake_at"] == clock.now()      # due now, not at the timeout
    assert aio(eng.drive()) == {run_id: "succeeded"}


def test_an_event_between_the_open_and_the_release_makes_the_run_due_at_once(store, clock, aio, monkeypatch):
    """The wait looks (nothing there), then an event commits while the visit still holds the lease (its
    ingestion cannot wake a leased run), then the visit releases: the release's wait check finds the event past
    the wait's cursor and makes the run due now."""
    class EventAfterLook(Wait):
        async def advance(self, v, p, sp, now, dues):
            done = await super().advance(v, p, sp, now, dues)
            if not done:
                await pay(v.store, "inv_7")
            return done

    ir = event_workflow(timeout="1h")
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_7"))
    monkeypatch.setitem(strategies.STEP_KINDS, "wait", EventAfterLook())
    assert aio(engine(store, Script(), clock=clock).drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id))["kind"] == "event"


def test_correlation_keeps_runs_apart_and_one_event_may_satisfy_many_runs(store, clock, aio):
    ir = event_workflow(timeout="1h", on_timeout="continue")
    aio(publish(store, ir))
    a = aio(start(store, ir, "inv_a", key="a"))
    a2 = aio(start(store, ir, "inv_a", key="a2"))     # a second run on the same invoice
    b = aio(start(store, ir, "inv_b", key="b"))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    event_id = aio(pay(store, "inv_a"))
    assert aio(eng.drive()) == {a: "succeeded", a2: "succeeded"}
    assert aio(output(store, a))["event"]["id"] == aio(output(store, a2))["event"]["id"] == event_id
    assert aio(run_row(store, b))["state"] == "waiting"


def test_two_waits_of_one_run_never_take_the_same_event(store, clock, aio):
    ir = event_workflow(timeout="1h", waits=2)
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_8"))
    first = aio(pay(store, "inv_8", key="p1"))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}           # pay0 took the event; pay1 waits for another
    second = aio(pay(store, "inv_8", key="p2"))
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert [aio(output(store, run_id, s))["event"]["id"] for s in ("pay0", "pay1")] == [first, second]


def test_an_if_that_refuses_or_fails_is_a_non_match_and_is_counted(store, clock, aio):
    ir = event_workflow(timeout="1h", condition="event.data.amountCents >= input.amountCents")
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_9", amountCents=1000))
    errors = COUNTERS.get("wait_event_if_errors_total")
    aio(pay(store, "inv_9", key="short", amountCents=10))      # refused
    aio(pay(store, "inv_9", key="broken"))                     # no amountCents: the `if` fails
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    [ew] = aio(event_waits(store, run_id))
    assert ew["cel_errors"] == 1
    assert COUNTERS.get("wait_event_if_errors_total") == errors + 1
    full = aio(pay(store, "inv_9", key="full", amountCents=1000))
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id))["event"]["id"] == full


def test_the_timeout_is_the_one_outcome_and_a_late_event_never_resumes_the_wait(store, clock, aio):
    ir = event_workflow(timeout="2s", on_timeout="continue")
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_10"))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    clock.advance(2)
    aio(pay(store, "inv_10"))                   # received at the instant: late
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id)) == {"kind": "timeout"}
    [w] = aio(waits(store, run_id))
    assert w["state"] == "timed_out" and w["satisfied_by"] is None


def test_an_event_received_before_the_instant_wins_even_when_the_look_comes_after_it(store, clock, aio):
    ir = event_workflow(timeout="2s", on_timeout="continue")
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_11"))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    clock.advance(1.99)
    event_id = aio(pay(store, "inv_11"))
    clock.advance(1)                            # the engine looks after the instant
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id))["event"]["id"] == event_id


def test_a_wait_that_times_out_fails_with_E_WAIT_TIMEOUT_naming_the_event(store, clock, aio):
    ir = event_workflow(timeout="2s")
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_12"))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    clock.advance(2)
    assert aio(eng.drive()) == {run_id: "failed"}
    assert ("pay", "action", 1, "failed", "E_WAIT_TIMEOUT") in aio(attempts(store, run_id))


def test_a_cancel_closes_the_open_wait_and_a_later_event_changes_nothing(store, clock, aio):
    from anthares44.automation.runtime.engine.cancels import cancel
    from tests.runtime.engine_support import PROJECT

    ir = event_workflow(timeout="1h")
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_13"))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    aio(cancel(store, PROJECT, run_id, by="ops"))
    aio(pay(store, "inv_13"))
    aio(eng.drive())
    [w] = aio(waits(store, run_id))
    assert (w["state"], w["satisfied_by"]) == ("cancelled", None)
    assert aio(run_row(store, run_id))["state"] == "cancelled"


def test_a_broadcast_wait_takes_any_event_of_its_type(store, clock, aio):
    ir = event_workflow(timeout="1h", correlate="none")
    aio(publish(store, ir))
    a = aio(start(store, ir, "x", key="a"))
    b = aio(start(store, ir, "y", key="b"))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    aio(pay(store, "anything"))
    assert aio(eng.drive()) == {a: "succeeded", b: "succeeded"}


def test_runs_and_runs_show_say_which_event_and_value_a_run_waits_for(store, clock, aio):
    from anthares44.automation.app.automation import Automation

    ir = event_workflow(timeout="1h")
    aio(publish(store, ir))
    aio(pay(store, "inv_14", key="early"))
    clock.advance(1)
    run_id = aio(start(store, ir, "inv_14"))
    aio(engine(store, Script(), clock=clock).drive())
    auto = Automation(store)
    [doc] = [d for d in aio(auto.runs(state="waiting")).runs if d["run_id"] == run_id]
    assert doc["waiting_on"] == "event billing.payment.received = inv_14"
    [w] = aio(auto.get_run(run_id))["waits"]
    assert (w["kind"], w["key"], w["correlation"], w["before_since"], w["if_errors"]) == (
        "event", "billing.payment.received", "inv_14", 1, 0)


def test_an_event_its_correlation_program_cannot_read_is_published_counted_and_matches_nothing(store, clock, aio):
    from anthares44.automation.runtime.ingestion.bus import publish_event
    from tests.runtime.engine_support import PROJECT
    from tests.waits.event_support import TYPE

    ir = event_workflow(timeout="1h", correlate='{run: "input.invoiceId", event: "data.invoice.id"}')
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_15"))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    errors = COUNTERS.get("wait_correlation_errors_total")
    got = aio(publish_event(store, PROJECT, TYPE, {"invoice": "not an object"}, "hostile-1"))
    assert got.created                                         # the event is stored; only the index misses it
    assert COUNTERS.get("wait_correlation_errors_total") == errors + 1
    assert aio(eng.drive()) == {}
    aio(publish_event(store, PROJECT, TYPE, {"invoice": {"id": "inv_15"}}, "good-1"))
    assert aio(eng.drive()) == {run_id: "succeeded"}
