"""Poison-run benchmark (issue 10 §2). Not a test: it prints figures.

    .venv/bin/python bench/bench_poison.py                   # N = 100 healthy runs, 2+2 poisons, 3 repeats
    .venv/bin/python bench/bench_poison.py --n 100 --poisons 4 --repeat 5

Two real `a44 automation serve` daemons (lease 3 s) on one embedded PostgreSQL (fresh database per repeat), the
scenario of tests/runtime/poison_support.py: N healthy runs alone (baseline), then N healthy runs next to the
poisons (nested Jinja `range` over input.n = 20,000; `if: input.code.matches('^(\\d|\\d\\d)*-$')` on 40 digits).
Prints the median healthy latency (created_at -> finished_at) of both phases, their ratio, the poisons'
outcome, and lease re-grants / interrupted attempts (both must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_runtime as br  # noqa: E402

from tests.runtime.poison_support import run_scenario  # noqa: E402


async def fresh_database(url: str, name: str) -> str:
    admin = url.rsplit("/", 1)[0] + "/postgres"
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f"create database {name}")
    finally:
        await conn.close()
    return url.rsplit("/", 1)[0] + "/" + name


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100, help="healthy runs per phase")
    ap.add_argument("--poisons", type=int, default=2, help="runs of each poison")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="a44-bench-poison-"))
    server, url = br.start_server(root / "pg", durable=True)
    ratios, bases, hots = [], [], []
    try:
        for i in range(args.repeat):
            db = asyncio.run(fresh_database(url, f"poison_{i}"))
            home = root / f"home{i}"
            home.mkdir()
            f = run_scenario(db, home, n=args.n, poisons=args.poisons)
            base, hot = statistics.median(f.baseline_s), statistics.median(f.poisoned_s)
            bases.append(base)
            hots.append(hot)
            ratios.append(hot / base)
            outcomes = sorted({(wf, state, code) for wf, state, code in f.poison.values()})
            print(f"repeat {i + 1}: healthy median baseline {base * 1000:.0f} ms, next to poisons {hot * 1000:.0f} ms "
                  f"(ratio {hot / base:.2f}; p90 {f.p90(f.baseline_s) * 1000:.0f} / {f.p90(f.poisoned_s) * 1000:.0f} ms); "
                  f"healthy {f.healthy_states}; "
                  f"poisons {outcomes}; lease re-grants {f.lease_reclaims}, interrupted attempts "
                  f"{f.lease_expired_attempts}", flush=True)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"summary (N={args.n}, poisons={args.poisons}x2, {args.repeat} repeats): median baseline "
          f"{statistics.median(bases) * 1000:.0f} ms, median next to poisons {statistics.median(hots) * 1000:.0f} ms, "
          f"median ratio {statistics.median(ratios):.2f} (target <= 2)")


if __name__ == "__main__":
    main()
