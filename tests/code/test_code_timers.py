"""Durable timers of code workflows (§19, docs/timers.md) on the in-process engine: `step.sleep(id, "1mo", tz=...)`
and `step.sleep_until(id, instant)` store their due instant when they open and fire then; `max_duration` sets the
run's deadline; a naive instant is E_SLEEP_INVALID, one past the deadline E_SLEEP_EXCEEDS_RUN_DEADLINE."""

from __future__ import annotations

from datetime import timedelta

from anthares44.automation.calendar import Span, due_for
from tests.code.support import published_code
from tests.runtime.engine_support import engine

RENEWAL = '''from anthares44.automation import workflow, step


@workflow("code-renewal", version=1, max_duration="40d")
async def renewal(ctx, input):
    if input.get("at"):
        await step.sleep_until("launch", input["at"])
    else:
        await step.sleep("next-cycle", "1mo", tz="America/Sao_Paulo")
    return await step.run("report", lambda: {"ok": True}, timeout="5s")
'''


async def _start(store, tmp_path, key: str, input: dict) -> str:
    auto = await published_code(store, tmp_path, "renewal.py", RENEWAL)
    return (await auto.run("code-renewal", input, key)).run_id


async def _sleep(store, run_id: str, step: str) -> dict:
    (a,) = [a for a in await store.list_attempts(run_id) if a["step_id"] == step]
    return a


def test_a_code_sleep_of_a_month_in_a_zone_stores_its_instant_and_fires_then(store, clock, aio, tmp_path):
    async def body():
        run_id = await _start(store, tmp_path, "month", {})
        opened = clock.now()
        eng = engine(store, clock=clock)
        await eng.drive()
        run = await store.get_run(run_id)
        due = due_for(opened, Span(months=1), "America/Sao_Paulo")
        assert (run["state"], run["due_at"], run["next_wake_at"]) == ("sleeping", due, due)
        assert run["deadline_at"] == run["created_at"] + timedelta(days=40)
        clock.set(due - timedelta(seconds=1))
        assert await eng.drive() == {}
        clock.set(due)
        assert await eng.drive() == {run_id: "succeeded"}
        a = await _sleep(store, run_id, "next-cycle")
        assert (a["due_at"], a["result"]) == (due, {"due_at": due.isoformat(), "late_ms": 0})
    aio(body())


def test_code_sleep_until_a_naive_or_a_too_late_instant_fails_the_step(store, clock, aio, tmp_path):
    async def body():
        naive = await _start(store, tmp_path, "naive", {"at": "2026-07-01T09:00:00"})
        late = await _start(store, tmp_path, "late", {"at": (clock.now() + timedelta(days=41)).isoformat()})
        past = await _start(store, tmp_path, "past", {"at": (clock.now() - timedelta(seconds=5)).isoformat()})
        got = await engine(store, clock=clock).drive()
        assert got == {naive: "failed", late: "failed", past: "succeeded"}
        assert (await store.get_run(naive))["error_code"] == "E_SLEEP_INVALID"
        assert (await store.get_run(late))["error_code"] == "E_SLEEP_EXCEEDS_RUN_DEADLINE"
        assert (await _sleep(store, past, "launch"))["result"]["late_ms"] == 5000
    aio(body())


def test_a_woken_code_sleep_fires_at_once(store, clock, aio, tmp_path):
    from anthares44.automation.runtime.engine.timers import wake

    async def body():
        run_id = await _start(store, tmp_path, "woken", {})
        eng = engine(store, clock=clock)
        await eng.drive()
        clock.advance(timedelta(hours=1))
        await wake(store, "pj_default", run_id, "next-cycle", by="u", reason="paid early")
        assert await eng.drive() == {run_id: "succeeded"}
        assert (await _sleep(store, run_id, "next-cycle"))["result"]["due_at"] == clock.now().isoformat()
    aio(body())
