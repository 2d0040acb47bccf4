"""The claim against a backlog (issue 16): how long one `lease_claim` takes with N runs due, with the planner's
statistics stale (taken when --finished runs were in the table and none was due; the backlog arrived after,
as in a burst) and fresh (ANALYZE after the backlog), for the claim as migration
0022 wrote it and as it is now. Not a test: it prints figures.

    .venv/bin/python bench/bench_claim.py [--due 100,2000,20000,100000] [--limit 64] [--calls 15]

Each call claims up to --limit runs inside a transaction that is rolled back, so every call sees the same
backlog; the figure is the median wall time of --calls calls (server-side execution and planning, one
connection, nothing else running). The backlog is --due pending runs of one workflow in the default queue,
copied from one run made by `Store.create_run` (`insert ... select generate_series`). Own embedded PostgreSQL in
a temp dir, fsync off (the figure is a read-mostly statement's latency, not commit durability).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import run_on_scratch_database  # noqa: E402

from anthares44.automation.app.publishing import publish  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402

MIGRATIONS = Path(__file__).resolve().parent.parent / "anthares44" / "automation" / "runtime" / "migrations"
PROJECT = "pj_default"
WF = "name: claim-bench\nversion: 1\nsteps:\n  - { id: a, uses: pass, timeout: 5s }\n"


class _RollBack(Exception):
    pass


def _claim_of(migration: str) -> str:
    """The `lease_claim` definition of one migration, as a `create or replace` to install it again."""
    text = (MIGRATIONS / migration).read_text()
    body = text[text.index("function automation.lease_claim"):]
    return "create or replace " + body


async def _claim_ms(c: asyncpg.Connection, limit: int, calls: int, explain: list | None = None) -> tuple[float, int]:
    times, granted = [], 0
    for i in range(calls):
        if explain is not None and i == calls - 1:     # the last call's plans (auto_explain, as notices)
            await c.execute("load 'auto_explain'; set auto_explain.log_min_duration = 0; "
                            "set auto_explain.log_analyze = on; set auto_explain.log_nested_statements = on; "
                            "set auto_explain.log_level = notice; set client_min_messages = notice")
            c.add_log_listener(lambda _c, m: explain.append(m.message))
        now = datetime.now(UTC)
        try:
            async with c.transaction():
                t = time.perf_counter()
                rows = await c.fetch("select * from automation.lease_claim($1, $2, $3, $4, $5)", "bench", now,
                                     limit, timedelta(seconds=30), now + timedelta(seconds=60))
                times.append((time.perf_counter() - t) * 1000)
                granted = len(rows)
                raise _RollBack
        except _RollBack:
            pass
    if explain is not None:
        await c.execute("set auto_explain.log_min_duration = -1")
    return statistics.median(times), granted


async def bench(url: str, dues: list[int], finished: int, limit: int, calls: int, explain: Path | None) -> None:
    home = Path(tempfile.mkdtemp(prefix="a44-claim-"))
    store = await Store.connect(url, results_dir=home / "results")
    await store.migrate()
    await store.ensure_partitions()
    (home / "wf.yaml").write_text(WF)
    report = await publish(store, PROJECT, [str(home / "wf.yaml")])
    if report.errors:
        raise SystemExit(f"publish failed: {[d.to_dict() for d in report.diagnostics]}")
    template = (await store.create_run(PROJECT, "wf_claim_bench", {}, "template", queue="q_default")).run_id
    await store.close()
    newest = max(m.name for m in MIGRATIONS.glob("*.sql") if "function automation.lease_claim" in m.read_text())
    variants = {"0022 (before)": _claim_of("0022_lease_claim.sql"), "now": _claim_of(newest)}
    c = await asyncpg.connect(url)
    # the history the statistics were taken on: finished runs only, as after the last burst drained
    await c.execute("insert into automation.runs select (jsonb_populate_record(r, jsonb_build_object("
                    "'run_id', 'run_claim_done_' || g, 'idempotency_key', 'd' || g, 'state', 'succeeded', "
                    "'next_wake_at', null, 'finished_at', now()))).* "
                    "from automation.runs r, generate_series(1, $2::integer) g where r.run_id = $1",
                    template, finished)
    await c.execute("analyze automation.runs")
    await c.execute("alter table automation.runs set (autovacuum_enabled = off)")   # keep the statistics stale
    have, rows = 1, {}

    async def measure(due: int, stats: str) -> None:
        cells, granted = [], 0
        for name, sql in variants.items():
            await c.execute(sql)
            plans: list | None = [] if explain and name == "now" else None
            ms, granted = await _claim_ms(c, limit, calls, plans)
            cells.append(f"{ms:.2f}")
            if plans:
                with explain.open("a") as f:
                    f.write(f"\n# {due:,} due, statistics {stats}: the claim's statements\n" + "\n".join(plans))
        rows[(due, stats)] = f"| {due:,} | {stats} | {' | '.join(cells)} | {granted} |"

    for due in dues:            # the backlog grows with the statistics as they were: stale
        t = time.perf_counter()
        await c.execute("insert into automation.runs select (jsonb_populate_record(r, jsonb_build_object("
                        "'run_id', 'run_claim_bench_' || g, 'idempotency_key', 'k' || g))).* "
                        "from automation.runs r, generate_series($2::integer, $3::integer) g where r.run_id = $1",
                        template, have + 1, due)
        have = due
        print(f"    ({due:,} runs due, made in {time.perf_counter() - t:.1f} s)", file=sys.stderr)
        await measure(due, "stale")
    for due in reversed(dues):  # ...then shrinks back, analyzed at each size: fresh
        await c.execute("delete from automation.runs where run_id like 'run_claim_bench_%' "
                        "and substr(run_id, 17)::integer > $1", due)
        await c.execute("vacuum analyze automation.runs")
        await measure(due, "fresh")
    print(f"| runs due | statistics | {' | '.join(f'claim {v}, ms' for v in variants)} | granted |")
    print(f"|---|---|{'---|' * len(variants)}---|")
    for due in dues:
        print(rows[(due, "stale")])
        print(rows[(due, "fresh")])
    await c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--due", default="100,2000,20000,100000", help="backlog sizes, ascending")
    ap.add_argument("--finished", type=int, default=10000,
                    help="finished runs in the table when the statistics were taken (none due then)")
    ap.add_argument("--limit", type=int, default=64, help="runs per claim (the daemon's --concurrency)")
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--explain", type=Path, metavar="FILE", help="append the current claim's plans to FILE")
    args = ap.parse_args()
    dues = sorted(int(x) for x in args.due.split(","))
    run_on_scratch_database("a44-claim-",
                            lambda url: bench(url, dues, args.finished, args.limit, args.calls, args.explain))


if __name__ == "__main__":
    main()
