"""The benchmark's three workflows on DBOS (helper of bench_runtime.py; DBOS is not a dependency: `pip install
dbos` to compare, the bench skips this side otherwise). One process per measurement, against the bench's
PostgreSQL, DBOS's system database being a database of its own:

    python bench/runtime_dbos.py SYSTEM_DB_URL APP_DB_URL FAR_SIDE_PORT WORKFLOW RUNS LATENCY_RUNS POSTMASTER_PID

WORKFLOW is pass | http | sql, the same three steps as bench_runtime.py's (a `pass` step returns its input, an
HTTP step POSTs to the far side with one aiohttp session, an `sql` step INSERTs a row on the application
database through an asyncpg pool: plain async steps, DBOS's fastest mode here). It runs RUNS workflows started at
once (`start_workflow_async`, all awaited), then LATENCY_RUNS one at a time (start, await the result: measured in
the process that runs them, no LISTEN round trip as on the a44 side), and prints one JSON line: runs_s,
cpu_ms_per_run (this process), pg_cpu_ms_per_run (the server, during the RUNS), lat_p50, lat_p99 (ms).
"""

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import aiohttp
import asyncpg
from dbos import DBOS, DBOSConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proc_cpu import own_cpu_s, pg_cpu_s  # noqa: E402

SHARED: dict = {}


@DBOS.step()
async def pass_step(n: int) -> dict:
    return {"n": n}


@DBOS.step()
async def http_step(name: str, n: int) -> dict:
    async with SHARED["http"].post(f"{SHARED['far']}/step/{name}", json={"n": n}) as r:
        r.raise_for_status()
        return await r.json()


@DBOS.step()
async def sql_step(n: int) -> dict:
    await SHARED["app"].execute("insert into bench_effects (n) values ($1)", n)
    return {"n": n}


@DBOS.workflow()
async def wf_pass(i: int) -> dict:
    a = await pass_step(1)
    await pass_step(a["n"])
    return await pass_step(3)


@DBOS.workflow()
async def wf_http(i: int) -> dict:
    await http_step("s1", 1)
    await http_step("s2", 2)
    return await http_step("s3", 3)


@DBOS.workflow()
async def wf_sql(i: int) -> dict:
    await sql_step(1)
    await sql_step(2)
    return await sql_step(3)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def main(sys_url: str, app_url: str, port: int, workflow: str, runs: int, latency_runs: int,
               postmaster: int) -> dict:
    config: DBOSConfig = {"name": "a44-bench", "system_database_url": sys_url, "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    SHARED["far"] = f"http://127.0.0.1:{port}"
    SHARED["http"] = aiohttp.ClientSession()
    SHARED["app"] = await asyncpg.create_pool(app_url, min_size=2, max_size=16)
    wf = {"pass": wf_pass, "http": wf_http, "sql": wf_sql}[workflow]
    try:
        await (await DBOS.start_workflow_async(wf, -1)).get_result()      # warm
        cpu0, pg0, t0 = own_cpu_s(), pg_cpu_s(postmaster), time.perf_counter()
        handles = await asyncio.gather(*(DBOS.start_workflow_async(wf, i) for i in range(runs)))
        await asyncio.gather(*(h.get_result() for h in handles))
        elapsed = time.perf_counter() - t0
        out = {"runs_s": runs / elapsed, "cpu_ms_per_run": (own_cpu_s() - cpu0) * 1000 / runs,
               "pg_cpu_ms_per_run": (pg_cpu_s(postmaster) - pg0) * 1000 / runs}
        lat = []
        for i in range(latency_runs):
            t = time.perf_counter()
            await (await DBOS.start_workflow_async(wf, runs + i)).get_result()
            lat.append((time.perf_counter() - t) * 1000)
            await asyncio.sleep(0.01)
        if lat:
            out.update(lat_p50=statistics.median(lat), lat_p99=pct(lat, 99))
        return out
    finally:
        await SHARED["http"].close()
        await SHARED["app"].close()
        DBOS.destroy()


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps(asyncio.run(main(a[0], a[1], int(a[2]), a[3], int(a[4]), int(a[5]), int(a[6])))), flush=True)
