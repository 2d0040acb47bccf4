"""Cost of one metrics scrape (docs/metrics.md): the system values that `GET /metrics` and `a44 automation metrics`
read from PostgreSQL (`app.metrics.collect`, every family's query) with 100,000 runs and 1,000,000 finished attempts
in the store (generated with `insert ... select generate_series`: 10 steps x 10 workflows, statuses and durations
spread, 1% of runs with a lease re-grant, 500 dead letters over 5 queues), then the rendering to Prometheus text.
Prints the median / max over `--scrapes` scrapes, per query and in all.

    .venv/bin/python bench/bench_metrics.py [--runs 100000] [--attempts 1000000] [--scrapes 10]

Own embedded PostgreSQL in a temp dir (fsync off to generate quickly: the figure is a read's latency)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import run_on_scratch_database  # noqa: E402

from anthares44.automation.app.metrics import collect  # noqa: E402
from anthares44.automation.http.metrics import render_metrics  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402

PROJECT = "pj_default"
QUERIES = {"metrics_queues": lambda s: {"now": s.clock.now()}, "metrics_runs": lambda s: {},
           "metrics_attempts": lambda s: {}, "metrics_duration_bounds": lambda s: {}, "metrics_breakers": lambda s: {},
           "metrics_deliveries": lambda s: {}, "metrics_counters": lambda s: {}}


async def generate(c, runs: int, attempts: int) -> None:
    t0 = time.perf_counter()
    await c.execute("""
        insert into automation.workflow_versions (project_id, workflow_id, version, sha256, ir, published_at)
        select $1, 'wf_' || w, 1, 'x', '{}'::jsonb, now() from generate_series(0, 9) w""", PROJECT)
    await c.execute(f"""
        insert into automation.runs (run_id, project_id, workflow_id, version, state, input, idempotency_key, queue,
                                     deadline_at, created_at, started_at, finished_at, updated_at, lease_reclaims)
        select 'run_' || g, '{PROJECT}', 'wf_' || (g % 10), 1,
               (array['succeeded', 'succeeded', 'succeeded', 'failed', 'pending'])[1 + g % 5], '{{}}'::jsonb,
               'k' || g, 'q_' || (g % 5), now() + interval '72 hours', now() - (g % 3600) * interval '1 second',
               now() - interval '1 hour', now(), now(), (g % 100 = 0)::integer
        from generate_series(1, {runs}) g""")
    per_run = attempts // runs
    await c.execute(f"""
        insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, started_at,
                                              finished_at, project_id)
        select 'run_' || g, 's' || s, 1 + (g + s) % 2, 'run_' || g || ':s' || s,
               (array['succeeded', 'succeeded', 'failed', 'timeout'])[1 + (g + s) % 4],
               date_trunc('month', now()) + (g % 86400) * interval '1 second',
               date_trunc('month', now()) + (g % 86400) * interval '1 second' + ((g * s) % 5000) * interval '1 ms',
               '{PROJECT}'
        from generate_series(1, {runs}) g, generate_series(1, {per_run}) s""")
    await c.execute(f"""
        insert into automation.dead_letters (dead_letter_id, project_id, queue, envelope, error_code, created_at)
        select 'dlq_' || g, '{PROJECT}', 'q_' || (g % 5), '{{}}', 'E_X', now() from generate_series(1, 500) g""")
    await c.execute("vacuum analyze")
    n = await c.fetchval("select count(*) from automation.step_attempts")
    print(f"generated {runs:,} runs and {n:,} finished attempts in {time.perf_counter() - t0:.1f}s (+ vacuum analyze)")


def stats(xs: list[float]) -> str:
    return f"median {statistics.median(xs):7.1f} ms  max {max(xs):7.1f} ms"


async def main_async(args, url: str) -> None:
    store = await Store.connect(url)
    await store.migrate()
    await store.ensure_partitions()
    c = await asyncpg.connect(url)
    await generate(c, args.runs, args.attempts)
    await c.close()
    await collect(store)                     # warm the prepared statements
    for name, params in QUERIES.items():
        lat = []
        for _ in range(args.scrapes):
            t0 = time.perf_counter()
            await store.fetch(name, **params(store))
            lat.append((time.perf_counter() - t0) * 1000)
        print(f"{name:24s} {stats(lat)}")
    whole, size = [], 0
    for _ in range(args.scrapes):
        t0 = time.perf_counter()
        size = len(render_metrics(await collect(store)))
        whole.append((time.perf_counter() - t0) * 1000)
    print(f"{'scrape (all + text)':24s} {stats(whole)}  ({size:,} bytes of text)")
    await store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--attempts", type=int, default=1_000_000)
    ap.add_argument("--scrapes", type=int, default=10)
    args = ap.parse_args()
    run_on_scratch_database("a44-bench-metrics-", lambda url: main_async(args, url))


if __name__ == "__main__":
    main()
