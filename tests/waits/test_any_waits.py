"""`wait: {any: [{event: ...}, {signal: NAME}, {sleep: 1d}], timeout?}` (§20, docs/waits.md "The first of
several") on the real engine and PostgreSQL with a ManualClock: the first to come wins and the output names it
(`kind`, `index`); a signal sent while the run waits wakes it, one sent between the look and the release is
caught by the release's check; when an event and a signal are both there at the look the earlier wins and the
loser stays unconsumed; the sleep and the timeout are outcomes like the others; a cancel closes the wait."""

from __future__ import annotations

from datetime import timedelta

from anthares44.automation.compiler import ir as irmod
from anthares44.automation.compiler.lint import compile_sources
from anthares44.automation.compiler.source import load_text
from anthares44.automation.diagnostics import Severity
from anthares44.automation.runtime.engine import strategies
from anthares44.automation.runtime.engine.signals import send
from anthares44.automation.runtime.engine.waits import Wait
from tests import store_queries as test_queries
from tests.runtime.engine_support import PROJECT, Script, engine, run_row
from tests.waits.event_support import output, pay, publish, start, waits

ANY = """name: {name}
version: 1
steps:
  - id: pay
    wait:
      any:
        - {{event: billing.payment.received, correlate: {{run: "input.invoiceId", event: "data.invoiceId"}}}}
        - {{signal: cancel}}
        - {{sleep: 1d}}
{timeout}      onTimeout: continue
  - id: after
    uses: pass
    timeout: 5s
"""


def any_workflow(name: str = "any", *, timeout: str | None = None, sleep: bool = True) -> irmod.WorkflowIR:
    text = ANY.format(name=name, timeout=f"      timeout: {timeout}\n" if timeout else "")
    if not sleep:
        text = text.replace("        - {sleep: 1d}\n", "")
    res = compile_sources([load_text(text, f"{name}.yaml")], "lint", lower=True)
    assert not [d for d in res.diagnostics if d.severity is Severity.ERROR], res.diagnostics
    [ir] = [v for v in res.irs.values() if isinstance(v, irmod.WorkflowIR)]
    return ir


async def _signals(store, run_id: str) -> list[dict]:
    return [dict(r) for r in await test_queries.fetch(store, "run_signals_of_run", run_id=run_id)]


def test_the_event_first_is_the_outcome_and_the_output_names_its_branch(store, clock, aio):
    ir = any_workflow()
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_1"))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    event_id = aio(pay(store, "inv_1"))
    assert aio(eng.drive()) == {run_id: "succeeded"}
    got = aio(output(store, run_id))
    assert (got["kind"], got["index"], got["event"]["id"]) == ("event", 0, event_id)
    [w] = aio(waits(store, run_id))
    assert (w["kind"], w["state"], w["satisfied_by"]) == ("any", "satisfied", f"event:{event_id}")


def test_a_signal_sent_before_the_wait_opens_wins_and_is_consumed(store, clock, aio):
    ir = any_workflow()
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_2"))
    assert aio(send(store, PROJECT, run_id, "cancel", {"why": "customer"}))["outcome"] == "buffered"
    assert aio(engine(store, Script(), clock=clock).drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id)) == {"kind": "signal", "index": 1,
                                          "signal": {"name": "cancel", "data": {"why": "customer"}}}
    assert [s["consumed_step"] for s in aio(_signals(store, run_id))] == ["pay"]


def test_a_signal_sent_while_the_run_waits_wakes_it(store, clock, aio):
    ir = any_workflow()
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_3"))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    assert aio(run_row(store, run_id))["next_wake_at"] == clock.now() + timedelta(days=1)   # the sleep's end
    clock.advance(5)
    aio(send(store, PROJECT, run_id, "cancel"))
    assert aio(run_row(store, run_id))["next_wake_at"] == clock.now()
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id))["kind"] == "signal"


def test_a_signal_between_the_look_and_the_release_makes_the_run_due_at_once(store, clock, aio, monkeypatch):
    class SignalAfterLook(Wait):
        async def advance(self, v, p, sp, now, dues):
            done = await super().advance(v, p, sp, now, dues)
            if not done:
                await send(v.store, PROJECT, v.lease.run_id, "cancel", "late")
            return done

    ir = any_workflow()
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_4"))
    monkeypatch.setitem(strategies.STEP_KINDS, "wait", SignalAfterLook())
    assert aio(engine(store, Script(), clock=clock).drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id))["signal"]["data"] == "late"


def test_when_an_event_and_a_signal_are_both_there_the_earlier_wins_and_the_other_stays(store, clock, aio):
    ir = any_workflow()
    aio(publish(store, ir))
    first = aio(start(store, ir, "inv_5", key="first"))
    second = aio(start(store, ir, "inv_6", key="second"))
    clock.advance(1)
    aio(send(store, PROJECT, first, "cancel", "early"))       # the signal first for `first`
    aio(pay(store, "inv_6"))                                  # the event first for `second`
    clock.advance(1)
    aio(pay(store, "inv_5"))
    aio(send(store, PROJECT, second, "cancel", "late"))
    assert aio(engine(store, Script(), clock=clock).drive()) == {first: "succeeded", second: "succeeded"}
    assert (aio(output(store, first))["kind"], aio(output(store, second))["kind"]) == ("signal", "event")
    assert [s["consumed_at"] is None for s in aio(_signals(store, second))] == [True]   # the loser: still buffered


def test_the_sleep_branch_is_an_outcome_when_nothing_else_came(store, clock, aio):
    ir = any_workflow()
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_7"))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    clock.advance(86400)
    aio(pay(store, "inv_7"))                 # at the sleep's end: the sleep came first
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id)) == {"kind": "sleep", "index": 2}


def test_without_a_sleep_the_timeout_is_the_outcome_and_nothing_later_resumes_it(store, clock, aio):
    ir = any_workflow("any-timeout", timeout="2s", sleep=False)
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_8"))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    clock.advance(2)
    aio(pay(store, "inv_8"))                 # both at the instant: late
    aio(send(store, PROJECT, run_id, "cancel"))
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id)) == {"kind": "timeout"}
    [w] = aio(waits(store, run_id))
    assert (w["state"], w["satisfied_by"]) == ("timed_out", None)


def test_a_cancel_closes_the_any_wait(store, clock, aio):
    from anthares44.automation.runtime.engine.cancels import cancel

    ir = any_workflow()
    aio(publish(store, ir))
    run_id = aio(start(store, ir, "inv_9"))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    aio(cancel(store, PROJECT, run_id, by="ops"))
    aio(pay(store, "inv_9"))
    aio(eng.drive())
    [w] = aio(waits(store, run_id))
    assert (w["state"], w["satisfied_by"]) == ("cancelled", None)
