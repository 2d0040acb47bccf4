"""What the step metrics cost an attempt's writes (docs/metrics.md): the insert of a running attempt plus its finish
(two statements, as the interpreter writes them), on three databases of one server side by side:

- `upsert`: the schema up to migration 0011, whose trigger joins the run and upserts the rollup at each finish;
- `delta`:  the current schema, whose trigger appends one row to an index-free table (folded later);
- `none`:   the current schema with the trigger dropped: the physical limit, no metrics at all.

Each round runs every variant once (interleaved, so a noisy neighbour hits all of them) with `--clients`
connections writing at once; prints the median microseconds per attempt over `--rounds` and the ratios.

    .venv/bin/python bench/bench_attempt_rollup.py [--attempts 3000] [--clients 1,8] [--rounds 5]

Own embedded PostgreSQL in a temp dir (fsync off: the figure is CPU per write, not commit latency)."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import run_on_scratch_database  # noqa: E402

from anthares44.automation.runtime.store.vocabulary import load_migrations  # noqa: E402

UPSERT_SCHEMA_UNTIL = 11   # the last migration before the deltas
RUNS = 1000


async def prepare(admin_url: str, name: str, upto: int | None, drop_trigger: bool) -> str:
    admin = await asyncpg.connect(admin_url)
    await admin.execute(f"create database {name}")
    await admin.close()
    url = admin_url.rsplit("/", 1)[0] + "/" + name
    c = await asyncpg.connect(url)
    for m in load_migrations():
        if upto is None or m.number <= upto:
            await c.execute(m.sql)
    await c.execute("insert into automation.workflow_versions values ('p', 'w', 1, 'x', '{}', now())")
    await c.execute(f"""insert into automation.runs (run_id, project_id, workflow_id, version, state,
        idempotency_key, deadline_at, created_at, updated_at)
        select 'r' || g, 'p', 'w', 1, 'running', 'k' || g, now(), now(), now() from generate_series(1, {RUNS}) g""")
    if drop_trigger:
        await c.execute("drop trigger step_attempts_metrics on automation.step_attempts")
    await c.close()
    return url


async def write(url: str, attempts: int, clients: int, base: int) -> float:
    """Microseconds of wall time per attempt with `clients` connections writing `attempts` in all."""
    conns = [await asyncpg.connect(url) for _ in range(clients)]
    per = attempts // clients

    async def client(c, k):
        for i in range(per):
            n = base + k * per + i
            rid = f"r{n % RUNS + 1}"
            await c.execute("insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, "
                            "status, started_at, project_id) values ($1, 's', $2, 'x', 'running', now(), 'p')", rid, n)
            await c.execute("update automation.step_attempts set status = 'succeeded', finished_at = now() "
                            "where run_id = $1 and attempt = $2", rid, n)

    t0 = time.perf_counter()
    await asyncio.gather(*(client(c, k) for k, c in enumerate(conns)))
    elapsed = time.perf_counter() - t0
    for c in conns:
        await c.close()
    return elapsed / (per * clients) * 1e6


async def bench(admin_url: str, args) -> None:
    variants = {"upsert": await prepare(admin_url, "v_upsert", UPSERT_SCHEMA_UNTIL, False),
                "delta": await prepare(admin_url, "v_delta", None, False),
                "none": await prepare(admin_url, "v_none", None, True)}
    for clients in args.clients:
        res: dict[str, list[float]] = {k: [] for k in variants}
        for r in range(args.rounds):
            for name, url in variants.items():
                res[name].append(await write(url, args.attempts, clients, (r + 1) * 10_000_000 * clients))
        med = {k: statistics.median(v) for k, v in res.items()}
        print(f"clients={clients}: median us per attempt (insert + finish) over {args.rounds} rounds")
        for k, v in med.items():
            print(f"  {k:7s} {v:8.1f}   metrics cost {v - med['none']:+7.1f} us   "
                  f"rounds {[round(x) for x in res[k]]}")
        print(f"  delta costs {(med['delta'] - med['none']) / max(med['upsert'] - med['none'], 1e-9):.0%} "
              f"of the upsert trigger's overhead; upsert/none {med['upsert'] / med['none']:.3f}, "
              f"delta/none {med['delta'] / med['none']:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attempts", type=int, default=3000)
    ap.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    async def body(url: str) -> None:
        await bench(url.rsplit("/", 1)[0] + "/postgres", args)

    run_on_scratch_database("a44-bench-rollup-", body)


if __name__ == "__main__":
    main()
