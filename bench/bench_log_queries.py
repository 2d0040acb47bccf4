"""Latency and plans of `logs query` (docs/observability.md "Log queries") over 1,000,000 step attempts of 100,000
runs spread over the last 80 days (three month partitions; generated with `insert ... select generate_series`: 10
workflows, 10 steps, 1,000 partition keys, 4% of attempts failed with one of 4 error codes). For each filter it
prints the median / max latency of the real query path (`Automation.query_logs`, limit 100, --since 30d) over
`--repeat` runs, and the indexes the plan (EXPLAIN ANALYZE of the same statement, planned for its parameters)
uses, and says SEQ SCAN when the plan reads a table whole.

    .venv/bin/python bench/bench_log_queries.py [--runs 100000] [--attempts 1000000] [--repeat 20]

Own embedded PostgreSQL in a temp dir (fsync off to generate quickly: the figures are read latencies)."""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import run_on_scratch_database  # noqa: E402

from anthares44.automation.app.automation import Automation  # noqa: E402
from anthares44.automation.app.logs import log_filter  # noqa: E402
from anthares44.automation.runtime.logs.query import Cursor, hot_params  # noqa: E402
from anthares44.automation.runtime.store.core import Store, _bind  # noqa: E402
from anthares44.automation.runtime.store.vocabulary import load_queries  # noqa: E402

PROJECT = "pj_default"
CASES = {
    "no filter": {},
    "--error-code": {"error_code": "E_UPSTREAM_503"},
    "--step": {"step": "s3"},
    "--workflow": {"workflow": "wf_7"},
    "--partition-key": {"partition_key": "acct_421"},
    "--error-code --step": {"error_code": "E_NETWORK", "step": "s5"},
    "--error-code --workflow": {"error_code": "E_STEP_TIMEOUT", "workflow": "wf_2"},
}


async def generate(c, runs: int, attempts: int) -> None:
    t0 = time.perf_counter()
    await c.execute("select automation.ensure_step_attempt_partitions(now() - interval '80 days', 3)")
    await c.execute("""
        insert into automation.workflow_versions (project_id, workflow_id, version, sha256, ir, published_at)
        select $1, 'wf_' || w, 1, 'x', '{}'::jsonb, now() from generate_series(0, 9) w""", PROJECT)
    await c.execute(f"""
        insert into automation.runs (run_id, project_id, workflow_id, version, state, idempotency_key, partition_key,
                                     deadline_at, created_at, started_at, finished_at, updated_at)
        select 'run_' || g, '{PROJECT}', 'wf_' || (g % 10), 1, 'succeeded', 'k' || g, 'acct_' || (g % 1000),
               now(), t, t, t + interval '1 minute', t
        from (select g, now() - interval '80 days' + (g::float8 / {runs}) * interval '80 days' as t
              from generate_series(1, {runs}) g) x""")
    per_run = attempts // runs
    await c.execute(f"""
        insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, error_code,
                                              started_at, finished_at, project_id)
        select r.run_id, 's' || s, 1, r.run_id || ':s' || s,
               case when (g * 7 + s) % 25 = 0 then 'failed' else 'succeeded' end,
               case when (g * 7 + s) % 25 = 0
                    then (array['E_UPSTREAM_503', 'E_NETWORK', 'E_STEP_TIMEOUT', 'E_UPSTREAM_429'])[1 + (g + s) % 4]
               end,
               r.created_at + s * interval '3 seconds', r.created_at + s * interval '3 seconds' + interval '120 ms',
               '{PROJECT}'
        from generate_series(1, {runs}) g
        join automation.runs r on r.run_id = 'run_' || g,
        generate_series(1, {per_run}) s""")
    await c.execute("vacuum analyze")
    n = await c.fetchval("select count(*) from automation.step_attempts")
    print(f"generated {runs:,} runs and {n:,} attempts over 80 days in {time.perf_counter() - t0:.1f}s "
          f"(+ vacuum analyze)")


def stats(xs: list[float]) -> str:
    return f"median {statistics.median(xs):7.1f} ms  max {max(xs):7.1f} ms"


async def plan(c, params: dict) -> str:
    q = load_queries()["logs_query"]
    async with c.transaction():
        await c.execute("set local plan_cache_mode = force_custom_plan")
        rows = await c.fetch("explain (analyze, costs off) " + q.sql, *_bind(q, params))
    text = "\n".join(r[0] for r in rows)
    indexes = sorted(set(re.findall(r"using (\w+)", text, re.I)))
    seq = " SEQ SCAN" if re.search(r"Seq Scan on (step_attempts|runs)", text) else ""
    return ", ".join(indexes) + seq


async def main_async(args, url: str) -> None:
    store = await Store.connect(url)
    await store.migrate()
    c = await asyncpg.connect(url)
    await generate(c, args.runs, args.attempts)
    auto = Automation(store, PROJECT)
    for name, filters in CASES.items():
        lat, page = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            page = await auto.query_logs(since="30d", limit=100, **filters)
            lat.append((time.perf_counter() - t0) * 1000)
        f = log_filter(PROJECT, store.clock.now(), since="30d", **filters)
        print(f"{name:26s} {stats(lat)}  rows {len(page.rows):3d}  plan: {await plan(c, hot_params(f, 100))}")
    # a deep page: the cursor of the 100th row of page 50 (keyset: no offset to skip)
    f = log_filter(PROJECT, store.clock.now(), since="30d")
    after = None
    for _ in range(50):
        page = await auto.query_logs(since="30d", limit=100, after=after)
        after = page.next
    lat = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        await auto.query_logs(since="30d", limit=100, after=after)
        lat.append((time.perf_counter() - t0) * 1000)
    print(f"{'page 51 (--after)':26s} {stats(lat)}  plan: {await plan(c, hot_params(f, 100, Cursor.decode(after)))}")
    lat = []
    for _ in range(max(3, args.repeat // 4)):
        t0 = time.perf_counter()
        page = await auto.query_logs(since="30d", limit=10_000, error_code="E_NETWORK")
        lat.append((time.perf_counter() - t0) * 1000)
    print(f"{'--error-code --limit 10000':26s} {stats(lat)}  rows {len(page.rows):,}")
    await c.close()
    await store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--attempts", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    run_on_scratch_database("a44-bench-logs-", lambda url: main_async(args, url))


if __name__ == "__main__":
    main()
