"""Per-partition ordering throughput (issue 4, "Speed"): `ordering: by-partition` over 100 keys, 2,000 runs,
runs/s and the ratio to `ordering: none` on the same workflow in the same run (target: at least 0.7).

    .venv/bin/python bench/bench_partitions.py                 # product defaults, medians of 3 repeats
    .venv/bin/python bench/bench_partitions.py --repeat 1 --runs 500    # a smoke run

Same setup as bench/bench_runtime.py (its helpers are reused): its own embedded PostgreSQL with the product's
settings (fsync, synchronous_commit and full_page_writes on), the same 3-step `pass` workflow (here naming queue
`q_bench`), 2,000 runs created at once with `Store.create_run` (partition key `k{i % 100}`, queue `q_bench`) while
the daemon is paused with SIGSTOP, then driven by ONE real `a44 automation serve --concurrency 64` subprocess
(a fresh one per measurement), from SIGCONT to the last `finished_at`. Each repeat measures both orderings on the
same workflow and the same runs' shape: the queue file `q_bench` (maxConcurrency 100, so the daemon's 64 slots are
the limit in both) is re-published with `ordering: none`, then with `ordering: by-partition` (the order of the two
alternates between repeats). The by-partition measurement also checks the guarantee: per key, runs started in
seq order and never overlapped (from `started_at` / `finished_at`). Prints both rates and the ratio, per repeat
and as medians.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_runtime as br  # noqa: E402

from anthares44.automation.compiler.models.queues import Queue  # noqa: E402
from anthares44.automation.runtime.queues import store_queues  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402

PROJECT = br.PROJECT
WORKFLOW = "wf_bench_part"
QUEUE = "q_bench"
PART_WF = """
name: bench-part
version: 1
queue: q_bench
steps:
  - { id: s1, uses: pass, timeout: 5s, output: { n: 1 } }
  - { id: s2, uses: pass, timeout: 5s, output: { n: "{{ steps.s1.output.n }}" } }
  - { id: s3, uses: pass, timeout: 5s, output: { n: 3 } }
"""
QUEUE_FILE = """
id: q_bench
maxConcurrency: 100
ordering: none
maxAttempts: 1
"""


async def prepare(url: str, home: Path) -> None:
    await br.prepare(url, home, {"q-bench.yaml": QUEUE_FILE, "bench-part.yaml": PART_WF})


async def set_ordering(url: str, home: Path, ordering: str) -> None:
    store = await Store.connect(url, results_dir=home / "results")
    await store_queues(store, PROJECT, [Queue(id=QUEUE, maxConcurrency=100, ordering=ordering, maxAttempts=1)])
    await store.close()


async def create_runs(store: Store, n: int, keys: int, prefix: str, parallel: int = 8) -> None:
    sem = asyncio.Semaphore(parallel)

    async def one(i):
        async with sem:
            await store.create_run(PROJECT, WORKFLOW, {"i": i}, f"{prefix}-{i}", partition_key=f"k{i % keys}",
                                   queue=QUEUE)

    await asyncio.gather(*(one(i) for i in range(n)))


async def check_order(c: asyncpg.Connection) -> int:
    """Per key: runs start in seq order and never overlap. Returns the number of violations."""
    rows = await c.fetch("select partition_key, seq, started_at, finished_at from automation.runs "
                         "where workflow_id = $1 order by partition_key, seq", WORKFLOW)
    bad = 0
    for a, b in zip(rows, rows[1:]):
        if a["partition_key"] == b["partition_key"] and b["started_at"] < a["finished_at"]:
            bad += 1
    return bad


async def measure(url: str, home: Path, ordering: str, args) -> dict:
    await br.truncate(url)
    await set_ordering(url, home, ordering)
    store = await Store.connect(url, min_size=2, max_size=8, results_dir=home / "results")
    d = br.DaemonProc(url, home, args.concurrency)
    try:
        d.pause()
        await create_runs(store, args.runs, args.keys, f"{ordering}-{time.monotonic_ns()}")
        await store.close()
        poll = await asyncpg.connect(url)
        t0 = time.time()
        d.resume()
        while True:
            await asyncio.sleep(0.05)
            left = await poll.fetchval("select count(*) from automation.runs where workflow_id = $1 and state <> "
                                       "all($2::text[])", WORKFLOW, list(br.TERMINAL))
            if left == 0:
                break
            if time.time() - t0 > 600:
                raise RuntimeError("runs did not finish in 10 minutes")
        last = await poll.fetchval("select extract(epoch from max(finished_at)) from automation.runs "
                                   "where workflow_id = $1", WORKFLOW)
        row = await poll.fetchrow(
            "select count(*) filter (where state <> 'succeeded') as bad, max(lease_grants) as grants, "
            "count(*) filter (where lease_grants > 1) as regranted from automation.runs where workflow_id = $1",
            WORKFLOW)
        violations = await check_order(poll) if ordering == "by-partition" else 0
        await poll.close()
        elapsed = float(last) - t0
        return {"runs_s": args.runs / elapsed, "elapsed_s": elapsed, "failed": row["bad"],
                "violations": violations, "hwm_mb": d.status("VmHWM")}
    finally:
        d.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=64, help="the daemon's --concurrency (runs in flight)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--daemon", choices=("a44", "module"), default="a44",
                    help="a44: `a44 automation serve`; module: bench/runtime_daemon.py (the same Daemon)")
    args = ap.parse_args()
    br.DAEMON_CMD[0] = args.daemon
    if args.daemon == "a44" and subprocess.run([br.A44, "automation", "serve", "--help"],
                                               capture_output=True).returncode:
        print("# `a44 automation serve --help` fails in this tree; using bench/runtime_daemon.py (same Daemon)")
        br.DAEMON_CMD[0] = "module"
    root = Path(tempfile.mkdtemp(prefix="a44-bench-part-"))
    home = root / "home"
    home.mkdir()
    server, url = br.start_server(root / "pg", True)
    res: dict[str, list[dict]] = {"none": [], "by-partition": []}
    try:
        asyncio.run(prepare(url, home))
        for r in range(args.repeat):
            order = ("none", "by-partition") if r % 2 == 0 else ("by-partition", "none")
            got = {o: asyncio.run(measure(url, home, o, args)) for o in order}
            for o, x in got.items():
                res[o].append(x)
            n, p = got["none"], got["by-partition"]
            print(f"  rep {r + 1}: none {n['runs_s']:,.0f} runs/s ({n['elapsed_s']:.2f}s) | by-partition "
                  f"{p['runs_s']:,.0f} runs/s ({p['elapsed_s']:.2f}s, order violations {p['violations']}) | "
                  f"ratio {p['runs_s'] / n['runs_s']:.2f} | not succeeded {n['failed']} / {p['failed']}",
                  flush=True)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    mn = statistics.median(x["runs_s"] for x in res["none"])
    mp = statistics.median(x["runs_s"] for x in res["by-partition"])
    who = "`a44 automation serve`" if br.DAEMON_CMD[0] == "a44" else "bench/runtime_daemon.py (Daemon.serve)"
    print(f"\n## product defaults (fsync on), {args.runs:,} runs of a 3-step `pass` workflow, {args.keys} keys, one "
          f"{who} subprocess --concurrency {args.concurrency}, medians of {args.repeat}")
    print(f"| ordering | runs/s | steps/s |\n|---|---|---|\n| none | {mn:,.0f} | {3 * mn:,.0f} |\n"
          f"| by-partition | {mp:,.0f} | {3 * mp:,.0f} |")
    print(f"ratio by-partition / none = {mp / mn:.2f}  (target >= 0.7); order violations "
          f"{sum(x['violations'] for x in res['by-partition'])}")


if __name__ == "__main__":
    main()
