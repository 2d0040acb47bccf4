"""Group commit micro-benchmark (issue 16). Not a test: it prints figures.

    .venv/bin/python bench/bench_group_commit.py                 # 3 interleaved repeats, 600 runs, 64 at once
    .venv/bin/python bench/bench_group_commit.py --quick

On its own embedded PostgreSQL with the product's settings (fsync, synchronous_commit, full_page_writes on), an
in-process `Engine` drives N already-created runs of a 3-step workflow whose steps have an effect (`pass` replaced
by a subclass the engine does not inline: each step gets its `running` row, then its finish with the next start),
so a run is 4 transitions. Modes, interleaved in every repeat:
  group        the engine as shipped: one `engine_commit_many` statement for every run ready at once
  one-stmt     group commit off: one `engine_commit` statement (one commit) per transition
  group-async  group commit with A44_SYNCHRONOUS_COMMIT=off
  raw-insert   the limit: single-row autocommit INSERTs from as many connections as the engine's pool, same length
For each: transitions/s, commits per transition (pg_stat_database.xact_commit delta: claims, notifications and
loads included), PostgreSQL CPU per transition (/proc of the server's processes) and the engine's own CPU per
transition (this process). The summary quotes medians.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import asyncpg  # noqa: E402
from bench_runtime import POSTMASTER, PROJECT, median, pg_cpu_s, prepare, settled_commits, start_server, truncate  # noqa: E402,E501
from runtime_roundtrips import EffectPass  # noqa: E402

from anthares44.automation.runtime.engine import Engine  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402
from anthares44.automation.settings import Settings  # noqa: E402
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry  # noqa: E402

TRANSITIONS_PER_RUN = 4     # start s1; finish s1 + start s2; finish s2 + start s3; finish s3 + succeeded
POOL = 16                   # the daemon's pool cap (daemon.POOL_MAX)
MODES = ("group", "one-stmt", "group-async", "raw-insert")


async def engine_mode(url: str, home: Path, n: int, concurrency: int, mode: str) -> dict:
    await truncate(url)
    store = await Store.connect(url, min_size=POOL, max_size=POOL, results_dir=home / "results")
    try:
        tag = f"gc-{mode}-{time.monotonic_ns()}"
        await asyncio.gather(*(store.create_run(PROJECT, "wf_bench_pass", {"i": i}, f"{tag}-{i}")
                               for i in range(n)))
        registry = ConnectorRegistry()
        registry.register(EffectPass(), "pass")
        settings = Settings(synchronous_commit="off" if mode == "group-async" else None)
        engine = Engine(store, registry, worker_id="gc", concurrency=concurrency, settings=settings,
                        group_commit=mode != "one-stmt")
        x0 = await settled_commits(url)
        cpu0, pg0, t0 = time.process_time(), pg_cpu_s(POSTMASTER[0]), time.perf_counter()
        await engine.drive()
        elapsed = time.perf_counter() - t0
        cpu, pg = time.process_time() - cpu0, pg_cpu_s(POSTMASTER[0]) - pg0
        statements = engine.committer.statements if engine.committer else n * TRANSITIONS_PER_RUN
    finally:
        await store.close()
    x1 = await settled_commits(url)
    t = n * TRANSITIONS_PER_RUN
    c = await asyncpg.connect(url)
    done = await c.fetchval("select count(*) from automation.runs where state = 'succeeded'")
    await c.close()
    assert done == n, f"{mode}: {done} of {n} runs succeeded"
    return {"tps": t / elapsed, "commits": (x1 - x0 - 2) / t, "pg_ms": pg * 1000 / t, "engine_ms": cpu * 1000 / t,
            "per_stmt": t / statements}


async def raw_mode(url: str, seconds: float) -> dict:
    setup = await asyncpg.connect(url)
    await setup.execute("create table if not exists bench_raw (id bigserial primary key, v text not null)")
    await setup.close()
    conns = [await asyncpg.connect(url) for _ in range(POOL)]
    x0 = await settled_commits(url)
    count, stop = [0], time.perf_counter() + seconds
    cpu0, pg0, t0 = time.process_time(), pg_cpu_s(POSTMASTER[0]), time.perf_counter()

    async def loop(conn):
        while time.perf_counter() < stop:
            await conn.execute("insert into bench_raw (v) values ($1)", "x")
            count[0] += 1

    await asyncio.gather(*(loop(c) for c in conns))
    elapsed = time.perf_counter() - t0
    cpu, pg = time.process_time() - cpu0, pg_cpu_s(POSTMASTER[0]) - pg0
    for c in conns:
        await c.close()
    x1 = await settled_commits(url)
    t = count[0]
    return {"tps": t / elapsed, "commits": (x1 - x0 - 2) / t, "pg_ms": pg * 1000 / t, "engine_ms": cpu * 1000 / t,
            "per_stmt": 1.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=600)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="200 runs, 1 repeat")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.repeat = 200, 1
    root = Path(tempfile.mkdtemp(prefix="a44-bench-gc-"))
    home = root / "home"
    home.mkdir()
    server, url = start_server(root / "pg", durable=True)
    results: dict[str, list[dict]] = {m: [] for m in MODES}
    try:
        asyncio.run(prepare(url, home))
        for rep in range(args.repeat):
            for mode in MODES:
                if mode == "raw-insert":
                    got = asyncio.run(raw_mode(url, 2.0))
                else:
                    got = asyncio.run(engine_mode(url, home, args.runs, args.concurrency, mode))
                results[mode].append(got)
                print(f"  rep {rep + 1} {mode:12} transitions/s {got['tps']:7,.0f} | commits/transition "
                      f"{got['commits']:.3f} | transitions/statement {got['per_stmt']:5.1f} | PostgreSQL CPU "
                      f"{got['pg_ms']:.3f} ms/transition | engine CPU {got['engine_ms']:.3f} ms/transition",
                      flush=True)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nmedians of {args.repeat} interleaved repeat(s), {args.runs} runs x {TRANSITIONS_PER_RUN} transitions, "
          f"{args.concurrency} at once, fsync on:")
    print("| mode | transitions/s | commits / transition | transitions / statement | PostgreSQL CPU ms / transition "
          "| engine CPU ms / transition |")
    print("|---|---|---|---|---|---|")
    for mode in MODES:
        m = {k: median([r[k] for r in results[mode]]) for k in results[mode][0]}
        print(f"| {mode} | {m['tps']:,.0f} | {m['commits']:.3f} | {m['per_stmt']:.1f} | {m['pg_ms']:.3f} | "
              f"{m['engine_ms']:.3f} |")


if __name__ == "__main__":
    main()
