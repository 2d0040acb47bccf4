"""The console's runs page over 1,000,000 runs (docs/console.md "Performance"): median / max latency of real HTTP
requests (aiohttp on 127.0.0.1, signed in with a token cookie, HTML rendered) for the first page, a deep keyset
page (half-way down: runs 30 days old) and each filter, against the 200 ms goal; then the EXPLAIN ANALYZE of the
page and count statements of the slowest case, naming the indexes they use (SEQ SCAN when a table is read whole).

Runs are generated with one `insert ... select generate_series` into the real schema: 60 days, 10 workflows, 5%
failed with one of 3 error codes (a fourth, E_SCHEMA_CHANGED, on 1 run in 10,000), 1,000 partition keys.

    .venv/bin/python bench/bench_console.py [--runs 1000000] [--repeat 15]

Own embedded PostgreSQL in a temp dir (fsync off to generate quickly: the figures are read latencies)."""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import run_on_scratch_database  # noqa: E402

from anthares44.automation.app.inspection import TOTAL_CAP, encode_cursor  # noqa: E402
from anthares44.automation.app.serve import HttpSettings  # noqa: E402
from anthares44.automation.http import HttpServer  # noqa: E402
from anthares44.automation.runtime.ingestion.tokens import create_token  # noqa: E402
from anthares44.automation.runtime.store.core import Store, _bind  # noqa: E402
from anthares44.automation.runtime.store.vocabulary import load_queries  # noqa: E402

PROJECT = "pj_default"
GOAL_MS = 200
CASES = {
    "first page": "",
    "deep keyset page": "after={deep}",
    "state=failed": "state=failed",
    "error_code (rare)": "error_code=E_SCHEMA_CHANGED",
    "workflow": "workflow=wf_7",
    "partition_key": "partition_key=acct_421",
    "since=24h": "since=24h",
    "state=partial + workflow": "state=partial&workflow=wf_3",
}

GENERATE = """
insert into automation.runs (run_id, project_id, workflow_id, version, state, idempotency_key, partition_key,
                             error_code, error_message, failed_step, deadline_at, created_at, updated_at,
                             started_at, finished_at)
select 'run_' || lpad(g::text, 26, '0'), $1, 'wf_' || (g % 10), 1,
       case when g % 20 = 0 then 'failed' when g % 97 = 0 then 'partial' else 'succeeded' end,
       'k' || g, 'acct_' || (g % 1000),
       case when g % 10000 = 0 then 'E_SCHEMA_CHANGED'
            when g % 20 = 0 then (array['E_UPSTREAM_503', 'E_UPSTREAM_400', 'E_TIMEOUT'])[1 + (g / 20) % 3] end,
       case when g % 20 = 0 then 'the far side said no' end,
       case when g % 20 = 0 then 's' || (g % 7) end,
       now() + interval '1 day', ts, ts, ts, ts + interval '2 seconds'
from (select g, now() - (interval '60 days') * (1 - g::float8 / $2) as ts from generate_series(1, $2) g) s
"""


async def body(url: str, args) -> None:
    store = await Store.connect(url, max_size=8)
    await store.migrate()
    async with store.connection("bench") as c:
        for wf in range(10):
            await c.execute("insert into automation.workflow_versions values ($1, $2, 1, 'x', '{}', now())",
                            PROJECT, f"wf_{wf}")
        t0 = time.monotonic()
        await c.execute(GENERATE, PROJECT, args.runs)
        await c.execute("analyze automation.runs")
        print(f"generated {args.runs:,} runs in {time.monotonic() - t0:.1f} s")
        deep_row = await c.fetchrow("select run_id, created_at from automation.runs where project_id = $1 "
                                    "order by created_at desc, run_id desc offset $2 limit 1", PROJECT, args.runs // 2)
    token = (await create_token(store, PROJECT, "bench", ["automation:read"], timedelta(days=1), None)).token
    server = await HttpServer(store, HttpSettings(port=0)).start()
    deep = encode_cursor(dict(deep_row))
    results = {}
    async with aiohttp.ClientSession(cookies={"a44_console": token}) as http:
        for name, query in CASES.items():
            path = f"{server.url}/runs?{query.format(deep=deep)}"
            times = []
            for i in range(args.repeat + 1):
                t = time.perf_counter()
                async with http.get(path, allow_redirects=False) as resp:
                    text = await resp.text()
                    assert resp.status == 200, (resp.status, text[:300])
                if i:                   # the first request warms the caches: not counted
                    times.append((time.perf_counter() - t) * 1000)
            total = re.search(r"<strong>([\d,]+\+?)</strong> matching", text).group(1)
            results[name] = (statistics.median(times), max(times), total)
    await server.stop()
    print(f"\n{'case':28} {'median ms':>10} {'max ms':>8} {'total':>9}  goal < {GOAL_MS} ms (median)")
    for name, (med, mx, total) in results.items():
        print(f"{name:28} {med:10.1f} {mx:8.1f} {total:>9}  {'ok' if med < GOAL_MS else 'SLOW'}")
    worst = max(results, key=lambda n: results[n][0])
    await explain(store, worst, CASES[worst], deep_row)
    await store.close()


async def explain(store, name: str, query: str, deep_row) -> None:
    from urllib.parse import parse_qsl

    q = dict(parse_qsl(query.replace("{deep}", "x")))
    now = store.clock.now()
    where = dict(project=PROJECT, state=q.get("state"), workflow=q.get("workflow"), step=None,
                 error_code=q.get("error_code"), partition_key=q.get("partition_key"),
                 since=now - timedelta(hours=24) if q.get("since") else None, until=None)
    before = (deep_row["created_at"], deep_row["run_id"]) if "after" in q else (None, None)
    queries = load_queries()
    print(f"\nslowest: {name}")
    for qname, params in (("runs_search", {**where, "before_at": before[0], "before_id": before[1], "limit": 51}),
                          ("runs_search_count", {**where, "cap": TOTAL_CAP + 1})):
        q = queries[qname]
        async with store.connection("explain") as c:
            plan = "\n".join(r[0] for r in await c.fetch(f"explain (analyze) {q.sql}", *_bind(q, params)))
        used = sorted(set(re.findall(r"using (\w+)", plan, re.I)))
        seq = " SEQ SCAN" if re.search(r"Seq Scan on runs", plan) else ""
        took = re.search(r"Execution Time: ([\d.]+) ms", plan).group(1)
        print(f"  {qname}: {took} ms, indexes {', '.join(used) or '-'}{seq}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()

    async def go(url):
        await body(url, args)
    run_on_scratch_database("a44-bench-console-", go)


if __name__ == "__main__":
    main()
