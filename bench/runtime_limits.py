"""The physical limits of the benchmark, measured in the same run (helper of bench_runtime.py): raw single-row
INSERTs/s from asyncpg, autocommit, on 1 or N connections; "insert, then update" per step; and bare aiohttp POSTs
to the HTTP workflow's far side (what three HTTP steps cost at the least, without any engine)."""

import asyncio
import time

import asyncpg
from proc_cpu import own_cpu_s, pid_cpu_s


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


async def raw_http(port: int, far_pid: int, seconds: float, concurrency: int = 64) -> dict:
    """Bare POSTs of the workflow's body to the far side from one aiohttp session in this process, `concurrency`
    at once: requests/s and the CPU per request of this process (the client) and of the far side."""
    import aiohttp

    url = f"http://127.0.0.1:{port}/step/s1"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256)) as session:
        async def one():
            async with session.post(url, json={"n": 1}) as resp:
                await resp.json()

        await asyncio.gather(*(one() for _ in range(concurrency)))        # connections open, warm
        n, stop = 0, time.perf_counter() + seconds
        cpu0, far0, t0 = own_cpu_s(), pid_cpu_s(far_pid), time.perf_counter()

        async def loop():
            nonlocal n
            while time.perf_counter() < stop:
                await one()
                n += 1

        await asyncio.gather(*(loop() for _ in range(concurrency)))
        dt = time.perf_counter() - t0
        return {"requests_s": n / dt, "client_cpu_ms": (own_cpu_s() - cpu0) * 1000 / n,
                "far_cpu_ms": (pid_cpu_s(far_pid) - far0) * 1000 / n}
