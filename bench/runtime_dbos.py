"""The benchmark's three workflows on DBOS (helper of bench_runtime.py; DBOS is not a dependency: it runs under
bench/.peers/venv's Python, `bash bench/install_peers.sh`). One process per measurement, against the bench's
PostgreSQL, DBOS's system database being a database of its own:

    python bench/runtime_dbos.py SYSTEM_DB_URL APP_DB_URL FAR_SIDE_PORT WORKFLOW MODE RUNS LATENCY_RUNS POSTMASTER

WORKFLOW is pass | http | sql, the same three steps as bench_runtime.py's:
- pass: a `@DBOS.step` returning its input;
- http: a step POSTing to the far side with one aiohttp session (async mode) or one `requests`-free
  http.client connection per thread (threads mode);
- sql: a DBOS datasource transaction (`SQLAlchemyDatasource.transaction`, DBOS 3's `@DBOS.transaction`) INSERTing a
  row into the application database: one transaction per step, which records its output in the same transaction
  (DBOS's exactly-once step on the application database), the same work as a44's `sql/execute` step (its own
  transaction per step).
MODE is how the RUNS are driven, DBOS at its best per workflow (issue 32):
- `threads`: synchronous workflows, every run started with `DBOS.start_workflow` (DBOS's thread pool runs them),
  then every result awaited;
- `async:K`: async workflows, at most K in flight (`start_workflow_async` + `get_result` under a semaphore);
- `async:0`: async workflows, every run started at once with no bound (the old driver).
Then LATENCY_RUNS one at a time (start, await the result: measured in the process that runs them, no LISTEN
round trip as on the a44 side). Prints one JSON line: runs_s, cpu_ms_per_run (this process), pg_cpu_ms_per_run
(the server, during the RUNS), lat_p50, lat_p99 (ms).
"""

import asyncio
import http.client
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import aiohttp
import sqlalchemy as sa
from dbos import DBOS, DBOSConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proc_cpu import own_cpu_s, pg_cpu_s  # noqa: E402

SHARED: dict = {}
LOCAL = threading.local()
INSERT = sa.text("insert into bench_effects (n) values (:n)")


# --- steps --------------------------------------------------------------------------------------------------
@DBOS.step()
async def pass_step_a(n: int) -> dict:
    return {"n": n}


@DBOS.step()
def pass_step(n: int) -> dict:
    return {"n": n}


@DBOS.step()
async def http_step_a(name: str, n: int) -> dict:
    async with SHARED["http"].post(f"{SHARED['far']}/step/{name}", json={"n": n}) as r:
        r.raise_for_status()
        return await r.json()


@DBOS.step()
def http_step(name: str, n: int) -> dict:
    conn = getattr(LOCAL, "conn", None)
    if conn is None:
        conn = LOCAL.conn = http.client.HTTPConnection("127.0.0.1", SHARED["port"])
    conn.request("POST", f"/step/{name}", json.dumps({"n": n}), {"Content-Type": "application/json"})
    r = conn.getresponse()
    body = r.read()
    if r.status >= 400:
        raise RuntimeError(f"far side answered {r.status}")
    return json.loads(body)


SQL: dict = {}      # the datasource's transactions, made in main() once the application database is known


def migrate_as_owner(app_url: str) -> None:
    """DBOS's outputs table in the application database, made by the superuser (the project's role may not create
    a schema there), the project's role granted what it needs: DBOS's documented split."""
    from dbos import SQLAlchemyDatasource

    user, rest = app_url.split("://", 1)[1].split("@", 1)
    SQLAlchemyDatasource.migrate(f"postgresql://postgres@{rest}", application_role=user.split(":", 1)[0])


def make_sync_sql(app_url: str) -> None:
    """A DBOS datasource on the application database (DBOS 3: `SQLAlchemyDatasource`, what `@DBOS.transaction`
    became): each step one transaction that also records the step's output, SERIALIZABLE as DBOS defaults."""
    from dbos import SQLAlchemyDatasource

    migrate_as_owner(app_url)
    ds = SQLAlchemyDatasource.create(app_url, run_migrations=False)

    @ds.transaction()
    def sql_tx(n: int) -> dict:
        ds.sql_session().execute(INSERT, {"n": n})
        return {"n": n}

    SQL["sync"] = sql_tx


async def make_async_sql(app_url: str) -> None:
    from dbos import AsyncSQLAlchemyDatasource

    migrate_as_owner(app_url)
    ds = await AsyncSQLAlchemyDatasource.create(app_url, run_migrations=False)

    @ds.transaction()
    async def sql_tx_a(n: int) -> dict:
        await ds.sql_session().execute(INSERT, {"n": n})
        return {"n": n}

    SQL["async"] = sql_tx_a


def sql_step(n: int) -> dict:
    return SQL["sync"](n)


# --- workflows ----------------------------------------------------------------------------------------------
@DBOS.workflow()
def wf_pass(i: int) -> dict:
    a = pass_step(1)
    pass_step(a["n"])
    return pass_step(3)


@DBOS.workflow()
async def wf_pass_a(i: int) -> dict:
    a = await pass_step_a(1)
    await pass_step_a(a["n"])
    return await pass_step_a(3)


@DBOS.workflow()
def wf_http(i: int) -> dict:
    http_step("s1", 1)
    http_step("s2", 2)
    return http_step("s3", 3)


@DBOS.workflow()
async def wf_http_a(i: int) -> dict:
    await http_step_a("s1", 1)
    await http_step_a("s2", 2)
    return await http_step_a("s3", 3)


@DBOS.workflow()
def wf_sql(i: int) -> dict:
    sql_step(1)
    sql_step(2)
    return sql_step(3)


@DBOS.workflow()
async def wf_sql_a(i: int) -> dict:
    await SQL["async"](1)
    await SQL["async"](2)
    return await SQL["async"](3)


SYNC = {"pass": wf_pass, "http": wf_http, "sql": wf_sql}
ASYNC = {"pass": wf_pass_a, "http": wf_http_a, "sql": wf_sql_a}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def drive_threads(wf, runs: int, latency_runs: int, postmaster: int) -> dict:
    wf(-1)      # warm (run directly: also a durable workflow)
    DBOS.start_workflow(wf, -2).get_result()
    cpu0, pg0, t0 = own_cpu_s(), pg_cpu_s(postmaster), time.perf_counter()
    handles = [DBOS.start_workflow(wf, i) for i in range(runs)]
    for h in handles:
        h.get_result()
    elapsed = time.perf_counter() - t0
    out = {"runs_s": runs / elapsed, "cpu_ms_per_run": (own_cpu_s() - cpu0) * 1000 / runs,
           "pg_cpu_ms_per_run": (pg_cpu_s(postmaster) - pg0) * 1000 / runs}
    lat = []
    for i in range(latency_runs):
        t = time.perf_counter()
        DBOS.start_workflow(wf, runs + i).get_result()
        lat.append((time.perf_counter() - t) * 1000)
        time.sleep(0.01)
    if lat:
        out.update(lat_p50=statistics.median(lat), lat_p99=pct(lat, 99))
    return out


async def drive_async(wf, bound: int, runs: int, latency_runs: int, postmaster: int) -> dict:
    SHARED["http"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
    try:
        await (await DBOS.start_workflow_async(wf, -1)).get_result()      # warm
        cpu0, pg0, t0 = own_cpu_s(), pg_cpu_s(postmaster), time.perf_counter()
        if bound:
            sem = asyncio.Semaphore(bound)

            async def one(i):
                async with sem:
                    return await (await DBOS.start_workflow_async(wf, i)).get_result()

            await asyncio.gather(*(one(i) for i in range(runs)))
        else:
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


def main(sys_url: str, app_url: str, port: int, workflow: str, mode: str, runs: int, latency_runs: int,
         postmaster: int) -> dict:
    config: DBOSConfig = {"name": "a44-bench", "system_database_url": sys_url, "log_level": "WARNING"}
    SHARED["far"], SHARED["port"] = f"http://127.0.0.1:{port}", port
    if mode == "threads":
        DBOS(config=config)
        if workflow == "sql":
            make_sync_sql(app_url)
        DBOS.launch()
        try:
            return drive_threads(SYNC[workflow], runs, latency_runs, postmaster)
        finally:
            DBOS.destroy()

    async def in_loop() -> dict:        # launched inside the loop its async workflows run on
        DBOS(config=config)
        if workflow == "sql":
            await make_async_sql(app_url)
        DBOS.launch()
        try:
            return await drive_async(ASYNC[workflow], int(mode.split(":", 1)[1]), runs, latency_runs, postmaster)
        finally:
            DBOS.destroy()

    return asyncio.run(in_loop())


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps(main(a[0], a[1], int(a[2]), a[3], a[4], int(a[5]), int(a[6]), int(a[7]))), flush=True)
