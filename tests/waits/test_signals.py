"""Signals to a run and `wait: {signal}` (§20, docs/waits.md) on the real engine and PostgreSQL with a ManualClock:
a signal sent before the wait opens is buffered and consumed by the open, one sent after closes the open wait and
wakes the run, the open/release interleaving loses nothing, a timeout is the one outcome a late signal cannot
change, signals of one name are consumed once each and in order, and the refusals (unknown run, finished run,
payload over 256 KB)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from anthares44.automation.compiler.ir import NodeIR, RetryIR, WaitIR
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.engine import strategies
from anthares44.automation.runtime.engine.signals import MAX_SIGNAL_BYTES, send
from anthares44.automation.runtime.engine.waits import Wait
from tests import store_queries as test_queries
from tests.runtime.engine_support import PROJECT, Script, attempts, engine, node, publish_and_run, run_row, workflow


def wait_node(id: str, signal: str = "approved", *, timeout_ms: int = 2_000, on_timeout: str = "fail") -> NodeIR:
    return NodeIR(id=id, index=0, kind="wait", connector=None, timeout_ms=None,
                  retry=RetryIR(max=0, strategy="none", base_ms=1000, cap_ms=1000), compensate=None, condition=None,
                  exclusive=False, sleep_ms=None, params={},
                  wait=WaitIR(kind="signal", signal=signal, timeout_ms=timeout_ms, on_timeout=on_timeout))


def gate(**kw) -> list[NodeIR]:
    return [node("a"), wait_node("gate", **kw), node("b")]


async def output(store, run_id: str, step: str):
    for a in await store.list_attempts(run_id):
        if a["step_id"] == step and a["status"] == "succeeded":
            return store.load_result(a)
    return None


async def waits(store, run_id: str) -> list[dict]:
    return [dict(r) for r in await store.fetch("run_waits_of_run", run_id=run_id)]


async def signals(store, run_id: str) -> list[dict]:
    return [dict(r) for r in await test_queries.fetch(store, "run_signals_of_run", run_id=run_id)]


def test_a_signal_sent_before_the_wait_opens_is_consumed_when_it_opens(store, clock, aio):
    run_id = aio(publish_and_run(store, workflow(gate())))
    sent = aio(send(store, PROJECT, run_id, "approved", {"by": "ana"}, key="k1"))
    assert sent["outcome"] == "buffered"
    assert aio(engine(store, Script(), clock=clock).drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id, "gate")) == {"kind": "signal", "signal": {"name": "approved",
                                                                                "data": {"by": "ana"}}}
    [w] = aio(waits(store, run_id))
    assert (w["state"], w["satisfied_by"], w["resumed_at"] is not None) == ("satisfied", f"signal:{sent['seq']}", True)
    assert aio(signals(store, run_id))[0]["consumed_step"] == "gate"


def test_a_signal_sent_while_the_run_waits_wakes_it_and_is_its_output(store, clock, aio):
    run_id = aio(publish_and_run(store, workflow(gate(timeout_ms=3_600_000))))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    run = aio(run_row(store, run_id))
    assert run["lease_owner"] is None and run["next_wake_at"] == clock.now() + timedelta(hours=1)
    clock.advance(5)
    assert aio(send(store, PROJECT, run_id, "approved", 42))["outcome"] == "delivered"
    assert aio(run_row(store, run_id))["next_wake_at"] == clock.now()      # due now, not at the timeout
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id, "gate"))["signal"] == {"name": "approved", "data": 42}


def test_a_signal_between_the_open_and_the_release_makes_the_run_due_at_once(store, clock, aio, monkeypatch):
    """The interleaving the release's wait check exists for: the wait opens (nothing buffered), then a signal
    commits and closes it while the visit still holds the lease (the signal cannot wake a leased run), then the
    visit releases the run to `waiting`: the release finds the closed wait and makes the run due now."""
    class SignalAfterOpen(Wait):
        async def advance(self, v, p, sp, now, dues):
            done = await super().advance(v, p, sp, now, dues)
            if not done:
                assert (await send(v.store, PROJECT, v.lease.run_id, "approved", "late"))["outcome"] == "delivered"
            return done

    monkeypatch.setitem(strategies.STEP_KINDS, "wait", SignalAfterOpen())
    run_id = aio(publish_and_run(store, workflow(gate(timeout_ms=3_600_000))))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "succeeded"}       # due at once: the same drive visits it again
    assert aio(output(store, run_id, "gate"))["signal"]["data"] == "late"


def test_the_timeout_is_the_one_outcome_and_a_late_signal_never_resumes_the_wait(store, clock, aio):
    run_id = aio(publish_and_run(store, workflow(gate(timeout_ms=2_000, on_timeout="continue"))))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    clock.advance(2)
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id, "gate")) == {"kind": "timeout"}
    [w] = aio(waits(store, run_id))
    assert w["state"] == "timed_out"
    with pytest.raises(A44Error) as e:       # the run is over: the late signal is refused, never consumed
        aio(send(store, PROJECT, run_id, "approved", 1))
    assert e.value.code == "E_SIGNAL_RUN_FINISHED" and e.value.details["state"] == "succeeded"


def test_a_wait_that_times_out_fails_the_step_with_E_WAIT_TIMEOUT(store, clock, aio):
    run_id = aio(publish_and_run(store, workflow(gate(timeout_ms=2_000))))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    clock.advance(2)
    assert aio(eng.drive()) == {run_id: "failed"}
    assert ("gate", "action", 1, "failed", "E_WAIT_TIMEOUT") in aio(attempts(store, run_id))
    assert aio(run_row(store, run_id))["error_code"] == "E_WAIT_TIMEOUT"


def test_signals_are_consumed_once_each_in_order_and_repeated_keys_are_one_signal(store, clock, aio):
    n = 20
    ir = workflow([wait_node(f"w{i}", timeout_ms=3_600_000) for i in range(n)])
    run_id = aio(publish_and_run(store, ir))
    for i in range(n // 2):              # half before any wait opens, each key sent twice
        for _ in range(2):
            aio(send(store, PROJECT, run_id, "approved", i, key=f"key-{i}"))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    for i in range(n // 2, n):           # the rest while the run waits
        outcomes = {aio(send(store, PROJECT, run_id, "approved", i, key=f"key-{i}"))["outcome"] for _ in range(2)}
        assert outcomes == {"delivered", "duplicate"}
        aio(eng.drive())
    assert aio(run_row(store, run_id))["state"] == "succeeded"
    assert [aio(output(store, run_id, f"w{i}"))["signal"]["data"] for i in range(n)] == list(range(n))
    sent = aio(signals(store, run_id))
    assert len(sent) == n and [s["consumed_step"] for s in sent] == [f"w{i}" for i in range(n)]


def test_a_cancel_closes_the_open_wait_and_later_signals_are_refused(store, clock, aio):
    from anthares44.automation.runtime.engine.cancels import cancel

    run_id = aio(publish_and_run(store, workflow(gate(timeout_ms=3_600_000))))
    aio(engine(store, Script(), clock=clock).drive())
    aio(cancel(store, PROJECT, run_id, by="ops"))
    assert [w["state"] for w in aio(waits(store, run_id))] == ["cancelled"]
    with pytest.raises(A44Error) as e:
        aio(send(store, PROJECT, run_id, "approved"))
    assert e.value.code == "E_SIGNAL_RUN_FINISHED" and e.value.details["state"] == "cancelled"


def test_refusals_unknown_run_oversized_payload_and_bad_name(store, clock, aio):
    run_id = aio(publish_and_run(store, workflow(gate())))
    with pytest.raises(A44Error) as e:
        aio(send(store, PROJECT, "run_nope", "approved"))
    assert e.value.code == "E_RUN_NOT_FOUND"
    with pytest.raises(A44Error) as e:
        aio(send(store, "pj_other", run_id, "approved"))
    assert e.value.code == "E_RUN_NOT_FOUND"
    with pytest.raises(A44Error) as e:
        aio(send(store, PROJECT, run_id, "approved", "x" * MAX_SIGNAL_BYTES))
    assert e.value.code == "E_SIGNAL_TOO_LARGE"
    with pytest.raises(A44Error) as e:
        aio(send(store, PROJECT, run_id, "Not A Name"))
    assert e.value.code == "E_SIGNAL_INVALID"
    assert aio(signals(store, run_id)) == []


def _wait_metrics(store, aio) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    from anthares44.automation.app.metrics import collect
    from anthares44.automation.http.metrics import render_metrics

    text = render_metrics(aio(collect(store, worker="w"))).decode()
    return {(f.name, s.labels["kind"]): s.value for f in text_string_to_metric_families(text)
            if f.name in ("automation_waits_open", "automation_oldest_wait_age_seconds") for s in f.samples}


def test_open_waits_and_the_oldest_wait_age_are_metrics(store, clock, aio):
    first = aio(publish_and_run(store, workflow(gate(timeout_ms=3_600_000)), key="m1"))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    clock.advance(60)
    aio(store.create_run(PROJECT, "wf_t", {}, "m2"))
    aio(eng.drive())
    clock.advance(30)
    assert _wait_metrics(store, aio) == {("automation_waits_open", "signal"): 2,
                                         ("automation_oldest_wait_age_seconds", "signal"): 90}
    aio(send(store, PROJECT, first, "approved"))
    assert _wait_metrics(store, aio) == {("automation_waits_open", "signal"): 1,
                                         ("automation_oldest_wait_age_seconds", "signal"): 30}
