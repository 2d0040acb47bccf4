"""The benchmark's three workflows as a Restate service (helper of runtime_restate.py; served by hypercorn under
bench/.peers/venv's Python, as the Restate Python SDK's docs say). One handler per workflow, each three durable
steps (`ctx.run_typed`): `pass` returns its input, `http` POSTs to the far side (FAR_SIDE_PORT) with one aiohttp
session, `sql` INSERTs a row into the application database (APP_DATABASE_URL) through an asyncpg pool, its own
transaction per step. GET /bench/done answers how many distinct runs reached their end (the bench's drain
check: no query against the server while it works).

    FAR_SIDE_PORT=... APP_DATABASE_URL=... python -m hypercorn --config CONF runtime_restate_app:app
"""

import asyncio
import json
import os
import time

import aiohttp
import asyncpg
import restate

bench = restate.Service("Bench")
SHARED: dict = {}
DONE: dict = {"ids": set(), "last": 0.0}


async def _http() -> aiohttp.ClientSession:
    if "http" not in SHARED:
        SHARED["http"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
    return SHARED["http"]


async def _pool() -> asyncpg.Pool:
    """One pool (16 connections, as DBOS's and a44's sides use at most): the first caller makes it, every run
    that starts meanwhile waits for that one instead of opening its own."""
    if "pool" not in SHARED:
        SHARED["pool"] = asyncio.ensure_future(
            asyncpg.create_pool(os.environ["APP_DATABASE_URL"], min_size=2, max_size=16))
    return await asyncio.shield(SHARED["pool"])


def _done(i: int) -> None:
    DONE["ids"].add(i)
    DONE["last"] = time.time()


async def pass_step(n: int) -> dict:
    return {"n": n}


async def http_step(name: str, n: int) -> dict:
    session = await _http()
    async with session.post(f"http://127.0.0.1:{os.environ['FAR_SIDE_PORT']}/step/{name}", json={"n": n}) as r:
        r.raise_for_status()
        return await r.json()


async def sql_step(n: int) -> dict:
    pool = await _pool()
    await pool.execute("insert into bench_effects (n) values ($1)", n)
    return {"n": n}


@bench.handler("pass")
async def run_pass(ctx: restate.Context, i: int) -> dict:
    a = await ctx.run_typed("s1", pass_step, n=1)
    await ctx.run_typed("s2", pass_step, n=a["n"])
    out = await ctx.run_typed("s3", pass_step, n=3)
    _done(i)
    return out


@bench.handler("http")
async def run_http(ctx: restate.Context, i: int) -> dict:
    await ctx.run_typed("s1", http_step, name="s1", n=1)
    await ctx.run_typed("s2", http_step, name="s2", n=2)
    out = await ctx.run_typed("s3", http_step, name="s3", n=3)
    _done(i)
    return out


@bench.handler("sql")
async def run_sql(ctx: restate.Context, i: int) -> dict:
    await ctx.run_typed("s1", sql_step, n=1)
    await ctx.run_typed("s2", sql_step, n=2)
    out = await ctx.run_typed("s3", sql_step, n=3)
    _done(i)
    return out


_restate = restate.app(services=[bench])


async def app(scope, receive, send):
    """The Restate app, plus GET /bench/done and POST /bench/reset for the bench."""
    if scope["type"] == "http" and scope["path"].startswith("/bench/"):
        if scope["path"] == "/bench/reset":
            DONE["ids"].clear()
            DONE["last"] = 0.0
        body = json.dumps({"n": len(DONE["ids"]), "last": DONE["last"]}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
        return
    await _restate(scope, receive, send)


if __name__ == "__main__":      # python bench/runtime_restate_app.py PORT: hypercorn in this one process
    import sys

    import hypercorn
    import hypercorn.asyncio

    conf = hypercorn.Config()
    conf.bind = [f"127.0.0.1:{sys.argv[1]}"]
    conf.h2_max_concurrent_streams = 2147483647       # the SDK docs' production settings
    conf.keep_alive_max_requests = 2147483647
    conf.keep_alive_timeout = 2147483647
    conf.accesslog = None
    asyncio.run(hypercorn.asyncio.serve(app, conf))
