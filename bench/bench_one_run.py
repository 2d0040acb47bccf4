"""Where the time of one run goes when runs come one at a time (issue 16: p50 <= 4 ms for a 3-step HTTP run). Not
a test: it prints figures.

    .venv/bin/python bench/bench_one_run.py [--runs 100] [--workflows http,pass]

A daemon (bench/runtime_daemon.py) on its own embedded PostgreSQL (the product's settings, fsync on), the HTTP far
side of bench_runtime.py; runs are created one at a time, idle in between, as in bench_runtime.py (c). For each
workflow it prints the client-observed and recorded p50, then the run's log as a timeline: the median offset of
each event from `run.created` (the events' `at` is the instant the daemon built the transition, before its
commit), and the PL/pgSQL functions by time per call inside PostgreSQL (track_functions, wall time) with the
number of calls per run. The gaps between events are what one transition costs end to end: its statement, its
commit (a WAL flush) and, for an effect step, the call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_runtime as br  # noqa: E402

from anthares44.automation.runtime.store.core import Store  # noqa: E402

TIMELINE = """
select array_agg(round((extract(epoch from e.at - r.created_at) * 1000)::numeric, 3) || ' ' || e.kind || ' '
                 || coalesce(e.step_id, '') || ' ' || coalesce(e.state, e.status, '') order by e.id) as ev
from automation.runs r
join automation.run_events e on e.run_id = r.run_id
where r.workflow_id = $1 and r.finished_at is not null
group by r.run_id, r.created_at
order by r.created_at desc
limit $2
"""


async def one_workflow(url: str, home: Path, workflow: str, runs: int) -> None:
    await br.truncate(url)
    store = await Store.connect(url, min_size=2, max_size=8, results_dir=home / "results")
    d = br.DaemonProc(url, home, 64)
    try:
        await br.latency(url, store, 20, workflow)          # warm-up, as bench_runtime (c) does
        # a backend reports its function counters when idle, at most every 10 s: wait for the warm-up's (each
        # pooled connection plans the claim once, tens of ms) to be reported, then start counting afresh
        await asyncio.sleep(11)
        c = await asyncpg.connect(url)
        await c.execute("select pg_stat_reset()")
        await c.close()
        observed, recorded = await br.latency(url, store, runs, workflow)
    finally:
        d.stop()
        await store.close()
    await asyncio.sleep(0.5)                                 # the daemon's backends exit and report
    c = await asyncpg.connect(url)
    try:
        rows = await c.fetch(TIMELINE, workflow, runs)
        funcs = await c.fetch("select funcname, calls, total_time, self_time from pg_stat_user_functions "
                              "order by total_time desc limit 8")
    finally:
        await c.close()
    print(f"\n## {workflow}: {runs} runs one at a time; client-observed p50 {br.pct(observed, 50):.2f} ms, "
          f"recorded (finished_at - created_at) p50 {br.pct(recorded, 50):.2f} ms")
    cols: dict[tuple[int, str], list[float]] = {}
    for r in rows:
        for i, e in enumerate(r["ev"]):
            ms, label = e.split(" ", 1)
            cols.setdefault((i, label.strip()), []).append(float(ms))
    print("| # | event | p50 ms after run.created |")
    print("|---|---|---|")
    for (i, label), xs in sorted(cols.items()):
        print(f"| {i} | {label} | {statistics.median(xs):.2f} |")
    print("| function | calls per run | ms per call in all | ms per call own |")
    print("|---|---|---|---|")
    for f in funcs:
        n = max(f["calls"], 1)
        print(f"| {f['funcname']} | {f['calls'] / runs:.2f} | {f['total_time'] / n:.3f} | {f['self_time'] / n:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--workflows", default="http,pass", help="of pass, http")
    args = ap.parse_args()
    with br.site("a44-one-", "track_functions = 'pl'") as (home, _server, url):
        for wf in args.workflows.split(","):
            asyncio.run(one_workflow(url, home, br.WORKFLOWS[wf], args.runs))


if __name__ == "__main__":
    main()
