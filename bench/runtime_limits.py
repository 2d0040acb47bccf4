"""The physical limit of the benchmark's PostgreSQL, measured in the same run (helper of bench_runtime.py): raw
single-row INSERTs/s from asyncpg, autocommit, on 1 or N connections, and "insert, then update" per step."""

import asyncio
import time

import asyncpg


async def raw_inserts(url: str, conns: int, seconds: float) -> float:
    setup = await asyncpg.connect(url)
    await setup.execute("create table if not exists bench_raw (id bigserial primary key, v text not null)")
    await setup.close()
    cs = [await asyncpg.connect(url) for _ in range(conns)]
    stop = time.perf_counter() + seconds
    counts = [0] * conns

    async def loop(i, c):
        while time.perf_counter() < stop:
            await c.execute("insert into bench_raw (v) values ($1)", "x")
            counts[i] += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(loop(i, c) for i, c in enumerate(cs)))
    dt = time.perf_counter() - t0
    for c in cs:
        await c.close()
    return sum(counts) / dt


async def insert_then_update(url: str, seconds: float) -> float:
    """The issue's reference shape: per step, INSERT its row (running), then UPDATE it (done): 2 commits/step."""
    c = await asyncpg.connect(url)
    await c.execute("create table if not exists bench_steps (id bigserial primary key, status text, result jsonb)")
    n, stop, t0 = 0, time.perf_counter() + seconds, time.perf_counter()
    while time.perf_counter() < stop:
        i = await c.fetchval("insert into bench_steps (status) values ('running') returning id")
        await c.execute("update bench_steps set status = 'succeeded', result = '{}' where id = $1", i)
        n += 1
    dt = time.perf_counter() - t0
    await c.close()
    return n / dt
