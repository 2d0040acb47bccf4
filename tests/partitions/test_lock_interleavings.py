"""The interleavings of the partition locks (docs/partitions.md "One run per partition"), each driven on purpose:
runs of one workflow over the same day, on the real store and interpreter, with a scripted connector that blocks
a day until the test lets it go (tests/runtime/engine_support.Script)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from anthares44.automation.runtime.engine.cancels import cancel
from anthares44.automation.runtime.engine.partition_locks import PartitionLocks
from tests.partitions.support import PROJECT, compile_yaml, publish
from tests.partitions.test_partition_locks import overlap_yaml
from tests.runtime.engine_support import Script, engine, ref
from tests.runtime.pg import query


async def sql(url: str, q: str, *args) -> list[tuple]:
    """`query` for a test already inside the event loop."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return [tuple(r) for r in await conn.fetch(q, *args)]
    finally:
        await conn.close()

DAY = "2026-07-01"
KEY = f"load[{DAY}]"


def _ir(tmp_path, on_conflict=None):
    ir = compile_yaml(tmp_path, overlap_yaml("http://127.0.0.1:9", "one-day", on_conflict))
    node = ir.nodes[0].model_copy(update={"connector": ref("script")})
    return ir.model_copy(update={"nodes": (node,)})


async def _run(store, ir, key: str) -> str:
    return (await store.create_run(PROJECT, ir.workflow_id, {"from": DAY, "to": DAY}, key)).run_id


async def _holder(store, clock, script, ir, worker: str = "wa") -> tuple[str, asyncio.Task]:
    """Run A, driven alone by its daemon until its call of DAY is in flight (the script blocks it)."""
    await publish(store, ir)
    run_a = await _run(store, ir, f"holder-{worker}")
    eng = engine(store, script, clock=clock, worker_id=worker)
    before = script.called(KEY)
    task = asyncio.create_task(eng.run_once())
    while script.called(KEY) == before:
        await asyncio.sleep(0.01)
    return run_a, task, eng


def test_a_release_between_refusal_and_release_to_waiting_is_not_lost(store, clock, aio, tmp_path, pg_url,
                                                                      monkeypatch):
    """B is refused the day while A holds it; A's partition ends after B's refusal but before B's visit releases
    it to `waiting` (B still holds its lease, so A's release cannot wake it): B's release finds the day free and
    makes B due at once, not a minute later."""
    script = Script(plan={KEY: ["block:go"]})
    ir = _ir(tmp_path)

    async def body():
        run_a, task, _ = await _holder(store, clock, script, ir)
        run_b = await _run(store, ir, "b")
        gate = PartitionLocks.gate

        async def refused_then_a_ends(self, *args, **kw):
            started = await gate(self, *args, **kw)           # B is refused the day (A holds it) ...
            if self.waiting and not task.done():
                script.events["go"].set()               # ... then A's call answers and A's visit commits its end
                await task
                assert await sql(pg_url, "select count(*) from automation.partition_locks") == [(0,)]
            return started

        monkeypatch.setattr(PartitionLocks, "gate", refused_then_a_ends)
        await engine(store, script, clock=clock, worker_id="wb").run_once()     # B's visit: refused, released
        monkeypatch.undo()
        a, b = await store.get_run(run_a), await store.get_run(run_b)
        assert a["state"] == "succeeded"
        assert b["state"] == "waiting" and b["next_wake_at"] <= clock.now(), (b["state"], b["next_wake_at"])
        got = await engine(store, script, clock=clock, worker_id="wc").drive()     # due now: it runs
        assert got[run_b] == "succeeded"

    aio(body())


def test_a_key_taken_as_its_holder_ends_is_recorded_started_after_that_end(store, clock, aio, tmp_path, pg_url,
                                                                           monkeypatch):
    """B's visit reads its clock, then asks for the day's lock; A's partition ends in between (a second later) and
    B takes the day: B's attempt is stamped once the lock is held, so the execution log never shows it started
    before A's finished (the CI failure of test_locks_two_daemons: 1.2 ms of overlap in the log, none on the wire)."""
    script = Script(plan={KEY: ["block:go", "ok"]})
    ir = _ir(tmp_path)

    async def body():
        run_a, task, _ = await _holder(store, clock, script, ir)
        run_b = await _run(store, ir, "b")
        gate = PartitionLocks.gate

        async def a_ends_first(self, *args, **kw):
            if self.v.lease.run_id == run_b and not task.done():
                clock.advance(timedelta(seconds=1))     # A's call answers a second after B's visit read its clock
                script.events["go"].set()
                await task
            return await gate(self, *args, **kw)

        monkeypatch.setattr(PartitionLocks, "gate", a_ends_first)
        got = await engine(store, script, clock=clock, worker_id="wb").drive()
        monkeypatch.undo()
        assert got[run_b] == "succeeded"
        rows = await sql(pg_url, "select run_id, started_at, finished_at from automation.step_attempts "
                                 "where step_id = $1 and kind = 'action' order by started_at", KEY)
        (ra, _, a_end), (rb, b_start, _) = rows
        assert (ra, rb) == (run_a, run_b) and a_end <= b_start, rows

    aio(body())


def test_the_lock_stays_with_a_run_whose_daemon_died_and_the_waiter_goes_after_it(store, clock, aio, tmp_path,
                                                                                   pg_url):
    """A's daemon dies mid-call (its task is cancelled: no release runs); B waits, holding no worker. A's lease
    expires, another daemon takes A over and calls the day again (same key); only when A's partition ends does B
    take the day: never two runs on it."""
    script = Script(plan={KEY: ["block:never", "ok"]})
    ir = _ir(tmp_path)

    async def body():
        run_a, task, _ = await _holder(store, clock, script, ir, worker="dead")
        run_b = await _run(store, ir, "b")
        task.cancel()                                     # kill -9 of the holder's daemon, as far as A can tell
        with contextlib.suppress(asyncio.CancelledError):
            await task
        b = engine(store, script, clock=clock, worker_id="wb")
        await b.drive()
        assert (await store.get_run(run_b))["state"] == "waiting"
        assert await sql(pg_url, "select run_id from automation.partition_locks") == [(run_a,)]
        clock.advance(timedelta(seconds=31))              # A's lease expired; B's recheck is not due yet
        got = await engine(store, script, clock=clock, worker_id="w2").drive()
        assert got[run_a] == "succeeded" and got.get(run_b) == "succeeded"
        return run_a, run_b

    run_a, run_b = aio(body())
    calls = [(c[0], c[2], c[3].split(":")[0]) for c in script.calls]
    assert calls == [(KEY, 1, run_a), (KEY, 2, run_a), (KEY, 1, run_b)], calls     # A twice, then B
    assert query(pg_url, "select count(*) from automation.partition_locks") == [(0,)]


def test_a_cancelled_holder_releases_and_wakes_the_waiter(store, clock, aio, tmp_path, pg_url):
    script = Script(plan={KEY: ["block:never"]})
    ir = _ir(tmp_path)

    async def body():
        run_a, task, eng_a = await _holder(store, clock, script, ir)
        run_b = await _run(store, ir, "b")
        await engine(store, script, clock=clock, worker_id="wb").drive()
        assert (await store.get_run(run_b))["state"] == "waiting"
        await cancel(store, PROJECT, run_a, by="ops", reason="stuck")
        eng_a.drivers[run_a].cancel.ask()
        await task
        assert (await store.get_run(run_a))["state"] == "cancelled"
        b = await store.get_run(run_b)
        assert b["next_wake_at"] <= clock.now()           # woken by the cancel's release, not the recheck
        script.plan[KEY] = ["ok"]
        got = await engine(store, script, clock=clock, worker_id="wb").drive()
        assert got[run_b] == "succeeded"

    aio(body())
    assert query(pg_url, "select count(*) from automation.partition_locks") == [(0,)]
    assert query(pg_url, "select count(*) from automation.partition_lock_waiters") == [(0,)]


def test_a_stale_lock_is_taken_over_and_a_cancelled_waiter_stops_waiting(store, clock, aio, tmp_path, pg_url):
    script = Script()
    ir = _ir(tmp_path)

    async def body():
        await publish(store, ir)
        run_a, run_b = await _run(store, ir, "a"), await _run(store, ir, "b")
        # a lock left by a run that ended without releasing it (only a manual edit can do that)
        await sql(pg_url, "update automation.runs set state = 'failed', finished_at = now() where run_id = $1", run_a)
        await sql(pg_url, "insert into automation.partition_locks values ($1, $2, 'load', $3, $4, now())", PROJECT,
              ir.workflow_id, DAY, run_a)
        got = await engine(store, script, clock=clock, worker_id="wb").drive()
        assert got[run_b] == "succeeded" and script.called(KEY) == 1
        # a waiter cancelled while it waits leaves no waiter row behind
        script.plan[KEY] = ["block:never"]
        run_c, task, eng_c = await _holder(store, clock, script, ir, worker="wc")
        run_d = await _run(store, ir, "d")
        await engine(store, script, clock=clock, worker_id="wd").drive()
        d = await store.get_run(run_d)
        assert d["state"] == "waiting", (d["state"], d["error_message"], script.calls)
        assert await sql(pg_url, "select run_id from automation.partition_lock_waiters") == [(run_d,)]
        await cancel(store, PROJECT, run_d, by="ops", reason="not needed")
        assert (await store.get_run(run_d))["state"] == "cancelled"       # nobody held it: cancelled at once
        assert await sql(pg_url, "select count(*) from automation.partition_lock_waiters") == [(0,)]
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    aio(body())
