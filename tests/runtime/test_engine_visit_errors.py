"""What a worker does when a visit goes wrong outside a connector's own failure: a result PostgreSQL cannot store
fails its step (it used to abort every visit, calling the connector again at each lease), an unknown connector
fails its step, a visit that raises leaves its run to the lease while the worker drives the others, and a worker
shutting down hands its run back with what finished recorded."""

from __future__ import annotations

import asyncio
import logging

import pytest

from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.engine import strategies
from tests.runtime.engine_support import Script, attempts, engine, node, publish_and_run, run_row, workflow


class Answers(Script):
    """A connector whose answer is given: what an HTTP API's JSON (a "\\u0000" in a string) or a plugin's bug
    (a set) can hand the engine."""

    def __init__(self, answer):
        super().__init__("answers")
        self.answer = answer

    async def invoke(self, params, ctx):
        self.calls.append((ctx.step_id, "action", ctx.attempt, ctx.idempotency_key))
        return {"answer": self.answer}


@pytest.mark.parametrize("answer, says", [("tenant\x00acme", "U+0000"), ({"a", "b"}, "not JSON-serialisable")])
def test_a_result_postgresql_cannot_store_fails_the_step_at_once(store, clock, aio, answer, says):
    conn = Answers(answer)
    run_id = aio(publish_and_run(store, workflow([node("a", uses="answers", retry=(3, "fixed")), node("b")])))
    assert aio(engine(store, conn, Script(), clock=clock).drive()) == {run_id: "failed"}
    run = aio(run_row(store, run_id))
    assert (run["failed_step"], run["error_code"], run["lease_owner"]) == ("a", "E_RESULT_TOO_LARGE", None)
    assert says in run["error_message"]
    assert aio(attempts(store, run_id)) == [("a", "action", 1, "failed", "E_RESULT_TOO_LARGE")]
    assert conn.called("a") == 1                     # permanent: the connector is not called again


def test_an_unknown_connector_fails_its_step_naming_the_installed_ones(store, clock, aio):
    run_id = aio(publish_and_run(store, workflow([node("a", uses="nope")])))
    assert aio(engine(store, Script(), clock=clock).drive()) == {run_id: "failed"}
    run = aio(run_row(store, run_id))
    assert (run["failed_step"], run["error_code"]) == ("a", "E_CONNECTOR_NOT_FOUND")
    assert "'nope' is not installed" in run["error_message"] and "script" in run["error_message"]


@pytest.mark.parametrize("raised, logged", [(RuntimeError("a bug"), "visit failed"),
                                            (A44Error("E_DB", "connection reset"), "visit aborted by E_DB")])
def test_a_visit_that_raises_leaves_its_run_to_the_lease_and_the_worker_drives_the_others(
        store, clock, aio, monkeypatch, caplog, raised, logged):
    class Broken:
        def advance(self, v, p, sp, now, dues):
            raise raised

    broken = aio(publish_and_run(store, workflow([node("a"), node("nap", sleep_ms=1_000), node("b")]), key="k1"))
    healthy = aio(publish_and_run(store, workflow([node("a"), node("b")], name="u"), key="k2"))
    s = Script()
    eng = engine(store, s, clock=clock)
    monkeypatch.setitem(strategies.STEP_KINDS, "sleep", Broken())
    # a CLI test's dictConfig earlier in the session disables the loggers that existed then
    monkeypatch.setattr(logging.getLogger("a44.engine"), "disabled", False)
    with caplog.at_level(logging.WARNING, logger="a44.engine"):
        assert aio(eng.run_once()) == {broken: "error", healthy: "succeeded"}
    assert eng.metrics["visit_errors"] == 1
    assert any(logged in r.getMessage() and broken in r.getMessage() for r in caplog.records)
    run = aio(run_row(store, broken))
    assert (run["state"], run["lease_owner"]) == ("running", "w1")      # nothing more was written
    monkeypatch.undo()                               # the bug fixed: the run resumes once its lease expires
    assert aio(eng.drive()) == {}
    clock.advance(31)
    assert aio(eng.drive()) == {broken: "sleeping"}
    clock.advance(1)
    assert aio(eng.drive()) == {broken: "succeeded"}
    assert aio(run_row(store, broken))["lease_reclaims"] == 1
    # a's end was staged with the transition that raised, so it was never committed: a runs again, same key
    assert [c[2:] for c in s.calls if c[3] == f"{broken}:a"] == [(1, f"{broken}:a"), (2, f"{broken}:a")]
    assert sorted(aio(attempts(store, broken))) == [("a", "action", 1, "lease_expired", "E_LEASE_EXPIRED"),
                                                    ("a", "action", 2, "succeeded", None),
                                                    ("b", "action", 1, "succeeded", None),
                                                    ("nap", "action", 1, "succeeded", None)]


def test_a_worker_shutting_down_hands_its_run_back_with_the_finished_step_recorded(store, clock, aio):
    s = Script(plan={"a": ["block:go"]})
    run_id = aio(publish_and_run(store, workflow([node("a"), node("b")])))
    eng = engine(store, s, clock=clock)

    async def stop_during_a():
        visit = asyncio.create_task(eng.run_once())
        while not s.called("a"):
            await asyncio.sleep(0.01)
        eng.stopping = True
        s.events["go"].set()
        return await visit

    assert aio(stop_during_a()) == {run_id: "released"}
    assert eng.metrics["lease.released"] == 1 and s.called("b") == 0
    run = aio(run_row(store, run_id))
    assert run["lease_owner"] is None and run["next_wake_at"] <= clock.now()     # due again now, for anyone
    assert aio(engine(store, s, clock=clock, worker_id="w2").drive()) == {run_id: "succeeded"}
    assert aio(attempts(store, run_id)) == [("a", "action", 1, "succeeded", None), ("b", "action", 1, "succeeded",
                                                                                      None)]


class Raises(Script):
    """A connector with a bug: it raises what no connector should (its own TimeoutError, a KeyError)."""

    def __init__(self, exc):
        super().__init__("raises")
        self.exc = exc

    async def invoke(self, params, ctx):
        self.calls.append((ctx.step_id, "action", ctx.attempt, ctx.idempotency_key))
        raise self.exc


@pytest.mark.parametrize("exc, says", [(TimeoutError("pool exhausted"), "raised TimeoutError: pool exhausted"),
                                       (KeyError("id"), "raised KeyError: 'id'")])
def test_a_connector_that_raises_unexpectedly_fails_its_step_not_the_worker(store, clock, aio, exc, says):
    conn = Raises(exc)
    run_id = aio(publish_and_run(store, workflow([node("a", uses="raises", retry=(2, "fixed")), node("b")])))
    assert aio(engine(store, conn, Script(), clock=clock).drive()) == {run_id: "failed"}
    run = aio(run_row(store, run_id))
    assert (run["failed_step"], run["error_code"]) == ("a", "E_CONNECTOR_FAILED")
    assert run["error_message"] == f"connector 'raises' {says}"
    assert conn.called("a") == 1                   # a bug is not retried: E_CONNECTOR_FAILED is permanent
