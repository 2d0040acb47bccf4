"""The interleavings of docs/flow.md "Debounce and batch", each driven here: an event arriving during a flush,
two daemons flushing, a process killed (-9) between a flush's transition and its run, concurrent ingestions
from two daemons racing inline flushes, buffered events across a PostgreSQL restart. (Out-of-order occurred_at
and duplicate event ids: test_debounce.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from datetime import timedelta

from anthares44.automation.runtime.buffers.flush import flush
from anthares44.automation.runtime.buffers.flusher import BufferFlusher
from anthares44.automation.runtime.ingestion.bus import publish_event
from anthares44.automation.runtime.store.core import Store

from .support import batch_wf, buffers, debounce_wf, runs_of, send


def _events(run: dict) -> list[dict]:
    v = run["input"]
    return (json.loads(v) if isinstance(v, str) else v)["events"]


async def _until(check, what: str, tries: int = 1000) -> None:
    """Wait for a condition of the database (a backend waiting on a lock, a lock released), polling it."""
    for _ in range(tries):
        if bool(await check()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_an_event_arriving_during_a_flush_waits_for_it_then_opens_the_next_buffer(a44_env):
    """The flush holds the buffer's row lock from its take to its commit; the ingestion's upsert waits on it,
    then finds the buffer flushed and opens a new one: the event is in the next run, never in none or two."""
    env = a44_env
    env.publish(debounce_wf(quiet="1s", deliver="all"))
    send(env, "doc.changed", {"docId": "d", "n": 1}, "k1")
    send(env, "doc.changed", {"docId": "d", "n": 2}, "k2")
    env.clock.set(env.now + timedelta(seconds=1))        # due; nothing flushed it yet (no settle)
    store = env.store

    async def race():
        async with store.transaction("test_flush") as conn:
            row = await conn.fetchrow("flow_buffer_take_due", now=env.now)
            run_id = await flush(conn, row["buffer_id"], "quiet", env.now)
            late = asyncio.create_task(publish_event(store, env.project, "doc.changed", {"docId": "d", "n": 3}, "k3"))

            await _until(lambda: _waiting_on_lock(store), "the ingestion to wait on the buffer's lock")
            assert not late.done()
        got = await late                                 # the flush committed: the ingestion goes on
        return run_id, got

    run_id, got = env.call(race())
    assert got.deliveries[0]["outcome"] == "buffered"
    (first,) = runs_of(env, "wf_doc_sync")
    assert first["run_id"] == run_id and [e["data"]["n"] for e in _events(first)] == [1, 2]
    (open_,) = [b for b in buffers(env) if b["state"] == "open"]
    assert open_["events"] == 1
    env.advance("1s")
    assert [[e["data"]["n"] for e in _events(r)] for r in runs_of(env, "wf_doc_sync")] == [[1, 2], [3]]


async def _waiting_on_lock(store) -> int:
    async with store.pool.acquire() as conn:
        return await conn.fetchval("select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                                   "and datname = current_database()")


def test_two_daemons_flushing_the_same_due_buffers_flush_each_once(a44_env):
    env = a44_env
    env.publish(debounce_wf(quiet="1s", deliver="all"))
    for i in range(40):
        send(env, "doc.changed", {"docId": f"d{i}", "n": i}, f"k{i}")
    env.clock.set(env.now + timedelta(seconds=1))

    async def two():
        other = await Store.connect(env.store.url, clock=env.clock, max_size=4)
        try:
            a, b = BufferFlusher(env.store), BufferFlusher(other)
            return await asyncio.gather(a.tick(), b.tick(), a.tick(), b.tick())
        finally:
            await other.close()

    ticks = env.call(two())
    started = [r for t in ticks for r in t]
    assert len(started) == len(set(started)) == 40
    runs = runs_of(env, "wf_doc_sync")
    assert len(runs) == 40 and sorted(_events(r)[0]["data"]["n"] for r in runs) == list(range(40))
    assert all(len(_events(r)) == 1 for r in runs)


KILLED_FLUSH = """
import asyncio, sys
from datetime import datetime
from anthares44.automation.clock import VirtualClock
from anthares44.automation.runtime.buffers.flusher import BufferFlusher
from anthares44.automation.runtime.store.core import Store

async def main(url, now):
    store = await Store.connect(url, clock=VirtualClock(now), max_size=2)
    print("flushing", flush=True)
    await BufferFlusher(store).flush_one()
    print("flushed", flush=True)

asyncio.run(main(sys.argv[1], datetime.fromisoformat(sys.argv[2])))
"""


def test_kill_9_between_the_flush_transition_and_its_run_leaves_the_buffer_for_the_next_flush(a44_env, tmp_path):
    """A real process runs the flusher; the test holds the idempotency key its run needs, so the process stops
    after the transition open -> flushed, inside run_create; it is killed -9 there. Its transaction dies with it:
    the buffer is open again with every event, and the next flush starts exactly one run carrying them all."""
    env = a44_env
    env.publish(debounce_wf(quiet="1s", deliver="all"))
    for i in range(5):
        send(env, "doc.changed", {"docId": "d", "n": i}, f"k{i}")
    env.clock.set(env.now + timedelta(seconds=1))
    (buf,) = buffers(env)
    script = tmp_path / "killed_flush.py"
    script.write_text(KILLED_FLUSH)

    async def scenario():
        async with env.store.pool.acquire() as conn:
            hold = conn.transaction()
            await hold.start()
            # the key of the buffer's run, uncommitted: the process's run_create waits on it
            await conn.execute("insert into automation.idempotency_keys (project_id, key, run_id, created_at) "
                               "values ($1, $2, 'run_held_by_test', $3)", env.project, f"flow:{buf['buffer_id']}",
                               env.now)
            proc = await asyncio.create_subprocess_exec(sys.executable, str(script), env.store.url,
                                                        env.now.isoformat(), stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.PIPE)
            try:
                assert (await proc.stdout.readline()).strip() == b"flushing"
                await _until(lambda: _waiting_on_lock(env.store), "the process's run_create to wait on the key",
                             tries=3000)
                os.kill(proc.pid, signal.SIGKILL)
                await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()
            await hold.rollback()
        flusher = BufferFlusher(env.store)

        async def flushed() -> bool:
            return await flusher.flush_one() is not None
        await _until(flushed, "the killed process's transaction to end", tries=3000)
    env.call(scenario())
    (run,) = runs_of(env, "wf_doc_sync")
    assert [e["data"]["n"] for e in _events(run)] == [0, 1, 2, 3, 4]
    (after,) = buffers(env)
    assert after["buffer_id"] == buf["buffer_id"] and after["run_id"] == run["run_id"]
    assert after["flush_reason"] == "quiet"


def test_two_daemons_ingesting_one_key_while_batches_fill_put_each_event_in_one_run(a44_env):
    """Concurrent ingestions of one key from two stores race for the open batch and its inline maxSize flush:
    every event ends in exactly one run, none holds more than maxSize."""
    env = a44_env
    env.publish(batch_wf(max_size=7, max_wait="5s"))

    async def two():
        other = await Store.connect(env.store.url, clock=env.clock, max_size=8)
        try:
            async def burst(store, lo):
                for i in range(lo, lo + 60, 6):
                    await asyncio.gather(*(publish_event(store, env.project, "order.placed",
                                                         {"tenantId": "acme", "n": n}, f"o{n}")
                                           for n in range(i, i + 6)))
            await asyncio.gather(burst(env.store, 0), burst(other, 60))
        finally:
            await other.close()

    env.call(two())
    env.advance("5s")
    runs = runs_of(env, "wf_tenant_batch")
    seen = sorted(e["data"]["n"] for r in runs for e in _events(r))
    assert seen == list(range(120))
    assert all(len(_events(r)) <= 7 for r in runs) and sum(len(_events(r)) == 7 for r in runs) >= 16


def test_buffered_events_survive_a_postgresql_restart(a44_env):
    env = a44_env
    env.publish(debounce_wf(quiet="2s", deliver="all"))
    for i in range(3):
        send(env, "doc.changed", {"docId": "d", "n": i}, f"k{i}")
    env.restart_postgres()
    env.advance("2s")
    (run,) = runs_of(env, "wf_doc_sync")
    assert [e["data"]["n"] for e in _events(run)] == [0, 1, 2]
