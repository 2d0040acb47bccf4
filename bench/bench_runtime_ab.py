"""Interleaved A/B of daemon variants on the throughput figure of bench_runtime.py (issue 16). Not a test: it prints
figures. Each variant is an environment assignment the bench daemon (bench/runtime_daemon.py) reads:

    A44_BENCH_IN_FLIGHT=N[:M]   group statements in flight at most (committer.MAX_IN_FLIGHT), and M: the
                                transitions that must wait before a second one leaves (committer.SECOND_GROUP)
    A44_BENCH_UVLOOP=1          the daemon on uvloop's event loop (pip install uvloop; not a dependency)
    A44_BENCH_GROUPS=1          (any variant) print the group statements' sizes and durations
    A44_BENCH_TREE=DIR          the daemon runs the package of the checkout DIR (a worktree of another commit);
                                the database is migrated by this tree, so DIR must not need other migrations
    A44_BENCH_CPROFILE=FILE     the daemon under cProfile, its stats dumped to FILE at exit (pstats; a
                                profiled daemon is slower: for where the time goes, not for the figure)
    A44_BENCH_SQL=FILE          run FILE's SQL on the bench database before the daemon starts, e.g. a migration's
                                `create or replace function` against the one before it (give each variant one:
                                a file's definitions stay for the variants after it)
    A44_BENCH_SQL=schema:F,G    the functions F and G as schema.sql defines them now (the "after" side of such a
                                pair, or the current ones back after a variant file; bench/variants/ has some)

    .venv/bin/python bench/bench_runtime_ab.py --workflows http,pass A44_BENCH_IN_FLIGHT=1 A44_BENCH_IN_FLIGHT=2:16
    .venv/bin/python bench/bench_runtime_ab.py --functions A44_BENCH_UVLOOP= A44_BENCH_UVLOOP=1

Same server settings, workflows and measurement as bench_runtime.py's (b); the variants alternate inside every
repeat and the summary quotes medians. `--functions` turns on `track_functions = pl` for the bench database and
prints, per figure, the PL/pgSQL functions by their own time (wall time inside PostgreSQL, not CPU), and the
step-attempt durations (start recorded .. finish recorded) of the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_runtime as br  # noqa: E402


async def _functions(url: str) -> list[str]:
    """PL/pgSQL functions by own time since the last call (then resets), the writes of the busiest tables (how
    many updates were HOT: no index touched), and attempt durations of the runs."""
    c = await asyncpg.connect(url)
    try:
        await c.execute("select pg_stat_force_next_flush()")
        rows = await c.fetch("select funcname, calls, total_time, self_time from pg_stat_user_functions "
                             "order by self_time desc limit 8")
        tables = await c.fetch("select relname, n_tup_ins, n_tup_upd, n_tup_hot_upd from pg_stat_user_tables "
                               "where schemaname = 'automation' and n_tup_ins + n_tup_upd > 0 "
                               "order by n_tup_ins + n_tup_upd desc limit 4")
        att = await c.fetchval("select percentile_cont(array[0.5, 0.9]) within group (order by extract(epoch from "
                               "finished_at - started_at) * 1000) from automation.step_attempts")
        await c.execute("select pg_stat_reset()")
    finally:
        await c.close()
    out = [f"      {r['funcname']}: {r['calls']} calls, {r['self_time'] / max(r['calls'], 1) * 1000:.0f} us own, "
           f"{r['total_time'] / max(r['calls'], 1) * 1000:.0f} us in all per call" for r in rows]
    out += [f"      table {t['relname']}: {t['n_tup_ins']} inserts, {t['n_tup_upd']} updates "
            f"({100 * t['n_tup_hot_upd'] / max(t['n_tup_upd'], 1):.0f} % HOT)" for t in tables]
    if att:
        out.append(f"      step attempts p50 / p90: {att[0]:.1f} / {att[1]:.1f} ms")
    return out


def _group_line(home: Path) -> str | None:
    logs = sorted(home.glob("daemon-*.log"), key=lambda f: f.stat().st_mtime)
    for line in reversed(logs[-1].read_text().splitlines() if logs else []):
        if line.startswith("GROUPS"):
            return "      " + line
    return None


def _slowest_plans(log: Path, keep: int = 6) -> str:
    """The `keep` slowest auto_explain plans logged since the last call (the log is then truncated)."""
    plans, current = [], None
    for line in log.read_text(errors="replace").splitlines():
        if "LOG:  duration:" in line and "plan:" in line:
            current = [float(line.split("duration:")[1].split()[0]), [line]]
            plans.append(current)
        elif current is not None and not (" LOG: " in line or " ERROR: " in line or " STATEMENT: " in line):
            current[1].append(line)
        else:
            current = None
    log.write_text("")
    # a function's own statements (log_nested_statements) say more than the call that wraps them
    # and a wait for the claim's advisory lock (the warm-up's claims queue on it) says nothing about a plan
    plans = [p for p in plans if not any(line.lstrip().startswith("Function Scan on") or "pg_advisory_xact_lock" in line
                                         for line in p[1][:5])]
    plans.sort(key=lambda p: -p[0])
    return "\n".join("\n".join(lines) for _, lines in plans[:keep]) or "      (no plan slower than --explain)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", help="NAME=VALUE environment assignments (VALUE empty: unset)")
    ap.add_argument("--workflows", default="http,pass", help="of pass, http, sql")
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--functions", action="store_true", help="PL/pgSQL functions by own time, attempt durations")
    ap.add_argument("--explain", type=int, metavar="MS", default=0,
                    help="auto_explain (analyze, buffers, nested statements) every statement slower than MS into "
                         "the server's log, and print the plans of the slowest after each figure")
    args = ap.parse_args()
    settings: list[str] = []
    if args.functions:
        settings.append("track_functions = 'pl'")
    if args.explain:
        settings += ["session_preload_libraries = 'auto_explain'", f"auto_explain.log_min_duration = {args.explain}",
                     "auto_explain.log_analyze = on", "auto_explain.log_buffers = on",
                     "auto_explain.log_nested_statements = on", "auto_explain.log_timing = on"]
    figures: dict[tuple[str, str], list[dict]] = {}
    with br.site("a44-ab-", *settings) as (home, server, url):
        for r in range(args.repeat):
            for wf in args.workflows.split(","):
                for v in args.variants:
                    name, _, value = v.partition("=")
                    saved = os.environ.pop(name, None)
                    if value:
                        os.environ[name] = value
                    try:
                        tp = asyncio.run(br.throughput(url, home, args.runs, args.concurrency, br.WORKFLOWS[wf], 1))
                    finally:
                        os.environ.pop(name, None)
                        if saved is not None:
                            os.environ[name] = saved
                    figures.setdefault((wf, v), []).append(tp)
                    print(f"  rep {r + 1} {wf} {v}: {tp['runs_s']:,.0f} runs/s | commits/run "
                          f"{tp['commits_per_run']:.2f} | CPU ms/run daemon {tp['daemon_cpu_ms_per_run']:.2f} "
                          f"PostgreSQL {tp['pg_cpu_ms_per_run']:.2f} | machine busy {tp['busy_cores']:.2f} cores",
                          flush=True)
                    line = _group_line(home)
                    if line:
                        print(line, flush=True)
                    if args.functions:
                        print("\n".join(asyncio.run(_functions(url))), flush=True)
                    if args.explain:
                        print(_slowest_plans(server.log), flush=True)
    print(f"\nmedians of {args.repeat} interleaved repeats, {args.runs:,} runs per figure, --concurrency "
          f"{args.concurrency}:")
    print("| workflow | variant | runs/s | commits/run | CPU ms/run daemon + PostgreSQL | machine busy, cores |")
    print("|---|---|---|---|---|---|")
    for (wf, v), xs in figures.items():
        med = {k: statistics.median(x[k] for x in xs) for k in ("runs_s", "commits_per_run", "daemon_cpu_ms_per_run",
                                                                 "pg_cpu_ms_per_run", "busy_cores")}
        print(f"| {wf} | `{v}` | {med['runs_s']:,.0f} | {med['commits_per_run']:.2f} | "
              f"{med['daemon_cpu_ms_per_run']:.2f} + {med['pg_cpu_ms_per_run']:.2f} | {med['busy_cores']:.2f} |")


if __name__ == "__main__":
    main()
