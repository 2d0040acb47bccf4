"""Partition locks never deadlock (docs/partitions.md "One run per partition", migration 0046): each cycle that
once reached PostgreSQL's deadlock detector, driven on purpose on the real store with two connections, one
holding a transaction open the way a group commit (engine_commit_many) does. Before 0046, each test here met
`deadlock detected` after deadlock_timeout (found as a visit aborted in a CI run of test_partition_locks's
property test: the run lay idle until its lease expired)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import asyncpg

from anthares44.automation.runtime.engine.journal import Batch
from tests.partitions.support import PROJECT, compile_yaml, publish
from tests.partitions.test_partition_locks import overlap_yaml

STEP = "load"


async def _runs(store, tmp_path, n: int) -> tuple[str, list[str]]:
    ir = compile_yaml(tmp_path, overlap_yaml("http://127.0.0.1:9", "locks", None))
    await publish(store, ir)
    ids = [(await store.create_run(PROJECT, ir.workflow_id, {"from": "2026-07-01", "to": "2026-07-01"}, f"r{i}"))
           .run_id for i in range(n)]
    return ir.workflow_id, ids


def _take(store, workflow: str, run: str, keys: list[str], now):
    """The engine's own take (the named query partition_locks.py sends)."""
    return store.fetch("partition_locks_take", project=PROJECT, workflow=workflow, step=STEP, run_id=run,
                       keys=keys, wait=True, now=now)


async def _blocked_or_done(conn: asyncpg.Connection, task: asyncio.Task) -> None:
    """Until `task` has finished or a backend other than `conn`'s waits for a lock (up to 5 s)."""
    for _ in range(500):
        if task.done():
            return
        waiting = await conn.fetchval("select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                                      "and pid <> pg_backend_pid() and datname = current_database()")
        if waiting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the take neither finished nor waited")


DELETE = ("delete from automation.partition_locks where project_id = $1 and workflow_id = $2 and step_id = $3 "
          "and partition = $4")


def test_a_take_meets_a_group_commit_releasing_its_keys_in_another_order(store, clock, aio, tmp_path, pg_url):
    """A group commit ends day 7 of run 1, then day 6 of run 2, in one transaction; run 3 takes [6, 7] between the
    two. The take refuses both at once (6 held by run 2, 7 released but not yet committed: still run 1's) instead
    of holding 6 while it waits for 7; the commit goes through; run 3 is registered on both keys."""
    async def body():
        wf, (r1, r2, r3) = await _runs(store, tmp_path, 3)
        now = clock.now()
        assert await _take(store, wf, r1, ["7"], now) == []
        assert await _take(store, wf, r2, ["6"], now) == []
        group = await asyncpg.connect(pg_url)
        try:
            tx = group.transaction()
            await tx.start()
            await group.execute(DELETE, PROJECT, wf, STEP, "7")          # run 1's partition ends ...
            take = asyncio.create_task(_take(store, wf, r3, ["6", "7"], now))
            await _blocked_or_done(group, take)
            await asyncio.wait_for(group.execute(DELETE, PROJECT, wf, STEP, "6"), 10)   # ... then run 2's
            await tx.commit()
            refused = {r["partition"]: r["holder"] for r in await take}
        finally:
            await group.close()
        assert refused == {"6": r2, "7": r1}
        waiters = await store.pool.fetch("select partition from automation.partition_lock_waiters "
                                         "where run_id = $1 order by partition", r3)
        assert [w["partition"] for w in waiters] == ["6", "7"]
        assert await store.pool.fetchval("select count(*) from automation.partition_locks") == 0
    aio(body())


def test_two_takes_of_the_same_keys_in_opposite_orders(store, clock, aio, tmp_path, pg_url):
    """Run 1 takes ['a'] and, in the same transaction, later ['b']; run 2's take of ['b', 'a'] comes in between.
    Keys are taken sorted, so run 2 waits for 'a' holding nothing, and run 1 gets 'b'; run 2 is refused both."""
    async def body():
        wf, (r1, r2) = await _runs(store, tmp_path, 2)
        now = clock.now()
        first = await asyncpg.connect(pg_url)
        try:
            tx = first.transaction()
            await tx.start()
            q = "select * from automation.partition_locks_take_v2($1, $2, $3, $4, $5::text[], true, $6)"
            assert await first.fetch(q, PROJECT, wf, STEP, r1, ["a"], now) == []
            take = asyncio.create_task(_take(store, wf, r2, ["b", "a"], now))
            await _blocked_or_done(first, take)
            assert await asyncio.wait_for(first.fetch(q, PROJECT, wf, STEP, r1, ["b"], now), 10) == []
            await tx.commit()
            refused = {r["partition"]: r["holder"] for r in await take}
        finally:
            await first.close()
        assert refused == {"a": r1, "b": r1}
        held = await store.pool.fetch("select partition, run_id from automation.partition_locks order by 1")
        assert [tuple(h) for h in held] == [("a", r1), ("b", r1)]
    aio(body())


def _wait_check_op(run_id: str, now) -> tuple[str, str]:
    """The function and argument of the wait check a release to `waiting` appends (journal.Batch)."""
    ops: list = []
    Batch.partition_wait_check(SimpleNamespace(_ops=ops, lease=SimpleNamespace(run_id=run_id)), now)
    ((name, args),) = ops
    return f"automation.engine_op_{name}", json.dumps({**args, "now": now.isoformat()})


def test_two_group_commits_each_release_a_key_the_others_waiter_checks(store, clock, aio, tmp_path, pg_url):
    """Group 1 releases day 5 (run X) and releases run Z, which waits for day 7, to `waiting`; group 2 releases day
    7 (run V) and releases run Y, which waits for day 5. Each wait check finds the other group's release in
    flight: it makes its run due at once instead of waiting for it, and both groups commit."""
    async def body():
        wf, (x, v, y, z) = await _runs(store, tmp_path, 4)
        now = clock.now()
        assert await _take(store, wf, x, ["5"], now) == []
        assert await _take(store, wf, v, ["7"], now) == []
        assert len(await _take(store, wf, y, ["5"], now)) == 1
        assert len(await _take(store, wf, z, ["7"], now)) == 1
        await store.pool.execute("update automation.runs set state = 'waiting', lease_owner = null, "
                                 "next_wake_at = $2 where run_id = any($1::text[])", [y, z],
                                 now.replace(year=now.year + 1))
        g1, g2 = await asyncpg.connect(pg_url), await asyncpg.connect(pg_url)
        try:
            t1, t2 = g1.transaction(), g2.transaction()
            await t1.start()
            await t2.start()
            await g1.execute(DELETE, PROJECT, wf, STEP, "5")
            await g2.execute(DELETE, PROJECT, wf, STEP, "7")
            fn, arg = _wait_check_op(z, now)
            check1 = asyncio.create_task(g1.execute(f"select {fn}($1::jsonb)", arg))
            await _blocked_or_done(g2, check1)
            fn, arg = _wait_check_op(y, now)
            await asyncio.wait_for(g2.execute(f"select {fn}($1::jsonb)", arg), 10)
            await asyncio.wait_for(check1, 10)
            await t1.commit()
            await t2.commit()
        finally:
            await g1.close()
            await g2.close()
        due = await store.pool.fetch("select run_id, next_wake_at from automation.runs "
                                     "where run_id = any($1::text[])", [y, z])
        assert {r["run_id"]: r["next_wake_at"] for r in due} == {y: now, z: now}
    aio(body())
