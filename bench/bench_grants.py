"""Grant latency as history grows (issue 4, SPEC §7.5): the latency of one claim (`Engine.claim`, the daemon's
grant: advisory lock + `lease_claim` in one transaction) with an empty log, then with 5 million finished attempts
(1 million finished runs x 5 attempts, generated with `insert ... select generate_series`) in the log. Prints
both, the ratio (target < 1.5) and how long generation took.

    .venv/bin/python bench/bench_grants.py [--attempts 5000000] [--grants 400]

Own embedded PostgreSQL in a temp dir (fsync off to generate the history quickly: the figure compared is the
claim's latency, not commit durability)."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import run_on_scratch_database  # noqa: E402

from anthares44.automation.app.publishing import publish  # noqa: E402
from anthares44.automation.runtime.engine import Engine  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402

PROJECT = "pj_default"
WF = """name: grant-bench
version: 1
steps:
  - id: a
    uses: pass
    timeout: 5s
"""


async def measure(store: Store, n: int, tag: str) -> list[float]:
    for i in range(n):
        await store.create_run(PROJECT, "wf_grant_bench", {"i": i}, f"{tag}-{i}", queue="q_default")
    eng = Engine(store, worker_id="bench", lease=timedelta(seconds=30), concurrency=1)
    await _finish(store, (await eng.claim(1))[0]["run_id"])      # warm the prepared statements
    lat = []
    for _ in range(n - 1):
        t0 = time.perf_counter()
        rows = await eng.claim(1)
        lat.append((time.perf_counter() - t0) * 1000)
        assert len(rows) == 1
        # finish it (untimed), as a driver would: slots stay free, the queue cap (100) is never the limit here
        await _finish(store, rows[0]["run_id"])
    return lat


async def _finish(store: Store, run_id: str) -> None:
    async with store.connection("bench") as c:
        await c.execute("update automation.runs set state = 'succeeded', lease_owner = null, lease_deadline = null, "
                        "next_wake_at = null, finished_at = now() where run_id = $1", run_id)


async def generate(url: str, attempts: int) -> float:
    runs = attempts // 5
    c = await asyncpg.connect(url)
    t0 = time.perf_counter()
    await c.execute(f"""
        insert into automation.runs (run_id, project_id, workflow_id, version, state, input, idempotency_key,
                                     queue, deadline_at, created_at, started_at, finished_at, updated_at)
        select 'run_hist_' || g, '{PROJECT}', 'wf_grant_bench', 1, 'succeeded', '{{}}'::jsonb, 'hist-' || g,
               'q_default', now() + interval '72 hours', now() - interval '1 hour', now() - interval '1 hour',
               now() - interval '59 minutes', now()
        from generate_series(1, {runs}) g""")
    await c.execute(f"""
        insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, started_at,
                                              finished_at, project_id, result)
        select 'run_hist_' || g, 's' || s, 1, 'run_hist_' || g || ':s' || s, 'succeeded',
               date_trunc('month', now()) + (g % 86400) * interval '1 second',
               date_trunc('month', now()) + (g % 86400) * interval '1 second' + interval '5 ms',
               '{PROJECT}', '{{"ok": true}}'::jsonb
        from generate_series(1, {runs}) g, generate_series(1, 5) s""")
    took = time.perf_counter() - t0
    await c.execute("vacuum analyze automation.runs")
    await c.execute("analyze automation.step_attempts")
    n = await c.fetchval("select count(*) from automation.step_attempts")
    print(f"generated {runs:,} finished runs and {n:,} finished attempts in {took:.1f}s (+ vacuum analyze)")
    await c.close()
    return took


def summary(lat: list[float]) -> str:
    q = statistics.quantiles(lat, n=100)
    return f"p50 {statistics.median(lat):.3f} ms  p99 {q[98]:.3f} ms  mean {statistics.fmean(lat):.3f} ms"


async def main_async(args, url: str) -> None:
    store = await Store.connect(url)
    await store.migrate()
    await store.ensure_partitions()
    d = Path(tempfile.mkdtemp())
    (d / "wf.yaml").write_text(WF)
    rep = await publish(store, PROJECT, [str(d / "wf.yaml")])
    assert not rep.errors, [x.to_dict() for x in rep.diagnostics]
    empty = await measure(store, args.grants, "empty")
    print(f"grant latency, empty log:       {summary(empty)}")
    await generate(url, args.attempts)
    full = await measure(store, args.grants, "full")
    print(f"grant latency, {args.attempts:,} attempts: {summary(full)}")
    ratio = statistics.median(full) / statistics.median(empty)
    print(f"ratio (p50 with history / p50 empty): {ratio:.2f}  (target < 1.5)")
    await store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--attempts", type=int, default=5_000_000)
    ap.add_argument("--grants", type=int, default=400)
    args = ap.parse_args()
    run_on_scratch_database("a44-bench-grants-", lambda url: main_async(args, url))


if __name__ == "__main__":
    main()
