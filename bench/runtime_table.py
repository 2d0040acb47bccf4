"""The summary of bench_runtime.py: issue 16's table (a44 beside DBOS when it ran, medians over the interleaved
repeats), the scale-out over daemons, the physical limit of the same run and the ratios to it."""

from __future__ import annotations

import math
import os
import statistics

GOALS = {"pass": ">= 3,000", "http": ">= 1,500 (one daemon), >= 2,500 (two)", "sql": ""}
LABEL = {"pass": "no-op steps (`pass`)", "http": "an HTTP call per step (loopback server)",
         "sql": "an INSERT per step (`sql/execute`)"}
GOAL_RUNS_S = {"pass": 3000, "http": 1500}      # one daemon
CORES = os.cpu_count() or 1
ISSUE = {"pass": "954 / 179", "http": "342 / 149", "sql": "266 / 96"}     # a44 / DBOS when the issue was filed


def _med(reps: list[dict], key: str, field: str) -> float:
    xs = [r[key][field] for r in reps if key in r and field in r[key]]
    return statistics.median(xs) if xs else math.nan


def _fmt(x: float, spec: str = ",.0f") -> str:
    return "-" if x != x else format(x, spec)


def summary(res: dict, args, daemon_cmd: str = "a44") -> None:
    reps = res["reps"]
    limit1 = statistics.median(r["limit1"] for r in reps)
    limitn = statistics.median(r["limitn"] for r in reps)
    iu = statistics.median(r["insert_update"] for r in reps)
    label = "product defaults (fsync on, synchronous_commit on)" if res["durable"] else \
        "durable=False (fsync off, synchronous_commit off) - comparison only"
    one = min(args.daemons)
    print(f"\n## {label}: medians of {len(reps)} interleaved repeats; a44 = "
          f"{'`a44 automation serve`' if daemon_cmd == 'a44' else 'bench/runtime_daemon.py'} "
          f"--concurrency {args.concurrency}, {one} daemon(s); {args.runs:,} runs per figure")
    print("| 3-step workflow | a44 runs/s | DBOS runs/s | a44 commits/run | a44 CPU ms per run, daemon + PostgreSQL "
          "| DBOS CPU ms per run, process + PostgreSQL | issue (a44 / DBOS runs/s) | goal |")
    print("|---|---|---|---|---|---|---|---|")
    for wf in args.workflows:
        k, dk = f"tp_{wf}_{one}", f"dbos_{wf}"
        d, p = _med(reps, k, "daemon_cpu_ms_per_run"), _med(reps, k, "pg_cpu_ms_per_run")
        dd, dp = _med(reps, dk, "cpu_ms_per_run"), _med(reps, dk, "pg_cpu_ms_per_run")
        print(f"| {LABEL[wf]} | {_fmt(_med(reps, k, 'runs_s'))} | {_fmt(_med(reps, dk, 'runs_s'))} | "
              f"{_fmt(_med(reps, k, 'commits_per_run'), '.2f')} | {_fmt(d, '.2f')} + {_fmt(p, '.2f')} = "
              f"{_fmt(d + p, '.2f')} | {_fmt(dd, '.2f')} + {_fmt(dp, '.2f')} | {ISSUE[wf]} | {GOALS[wf]} |")
    for wf in args.latency_workflows:
        k, dk = f"lat_{wf}", f"dbos_{wf}"
        if not any(k in r for r in reps):
            continue
        goal = "p50 <= 4, p99 <= 12 ms" if wf == "http" else ""
        print(f"| one run at a time, p50 / p99 ms ({wf} steps) | {_fmt(_med(reps, k, 'lat_p50'), '.1f')} / "
              f"{_fmt(_med(reps, k, 'lat_p99'), '.1f')} | {_fmt(_med(reps, dk, 'lat_p50'), '.1f')} / "
              f"{_fmt(_med(reps, dk, 'lat_p99'), '.1f')} | daemon round trips/run "
              f"{_fmt(_med(reps, k, 'rt_per_run'), '.2f')} | recorded (finished - created) "
              f"{_fmt(_med(reps, k, 'lat_rec_p50'), '.1f')} / {_fmt(_med(reps, k, 'lat_rec_p99'), '.1f')} | | "
              f"{'9.4 / 34 ms / 7.2 / 20 ms' if wf == 'http' else ''} | {goal} |")
        print(f"| first 20 runs after the daemon is ready, p99 / max ms ({wf}) | "
              f"{_fmt(_med(reps, k, 'first_p99'), '.1f')} / {_fmt(_med(reps, k, 'first_max'), '.1f')} | | | | | "
              f"170-200 ms | |")
    if len(args.daemons) > 1:
        print(f"\nscale-out, runs/s (x the {one}-daemon figure), one PostgreSQL:")
        print("| workflow | " + " | ".join(f"{d} daemon(s)" for d in args.daemons) + " |")
        print("|---|" + "---|" * len(args.daemons))
        for wf in args.workflows:
            base = _med(reps, f"tp_{wf}_{one}", "runs_s")
            cells = []
            for d in args.daemons:
                x = _med(reps, f"tp_{wf}_{d}", "runs_s")
                cpu_d, cpu_p = (_med(reps, f"tp_{wf}_{d}", k) for k in ("daemon_cpu_ms_per_run", "pg_cpu_ms_per_run"))
                cells.append(f"{_fmt(x)} ({_fmt(x / base, '.2f')}x), CPU {_fmt(cpu_d, '.2f')} + {_fmt(cpu_p, '.2f')} ms")
            print(f"| {wf} | " + " | ".join(cells) + " |")
    print(f"\nCPU budget, {one} daemon(s): what one run costs every process on the machine, the ceiling that puts on "
          f"runs/s with all {CORES} cores busy, and how busy the machine was (daemon + PostgreSQL + far side + bench):")
    print("| workflow | daemon + PostgreSQL + far side, ms CPU per run | ceiling at that cost, runs/s | measured runs/s "
          "| machine busy, cores | goal needs, ms CPU per run in all |")
    print("|---|---|---|---|---|---|")
    for wf in args.workflows:
        k = f"tp_{wf}_{one}"
        d, p_, f = (_med(reps, k, x) for x in ("daemon_cpu_ms_per_run", "pg_cpu_ms_per_run", "far_cpu_ms_per_run"))
        total = d + p_ + (0 if f != f else f)
        goal = GOAL_RUNS_S.get(wf)
        print(f"| {wf} | {_fmt(d, '.2f')} + {_fmt(p_, '.2f')} + {_fmt(f, '.2f')} = {_fmt(total, '.2f')} | "
              f"{_fmt(CORES * 1000 / total)} | {_fmt(_med(reps, k, 'runs_s'))} | {_fmt(_med(reps, k, 'busy_cores'), '.2f')} "
              f"| {'-' if goal is None else _fmt(CORES * 1000 / goal, '.2f')} |")
    raw = [r["raw_http"] for r in reps if "raw_http" in r]
    if raw:
        client, far = (statistics.median(h[k] for h in raw) for k in ("client_cpu_ms", "far_cpu_ms"))
        print(f"\nthe HTTP floor, same run: bare aiohttp POSTs to the far side, {args.concurrency} at once, "
              f"{statistics.median(h['requests_s'] for h in raw):,.0f}/s; 3 of them (one run's steps, no engine, no "
              f"database) cost {3 * client:.2f} ms CPU in the client and {3 * far:.2f} ms in the far side, a ceiling "
              f"of {CORES * 1000 / (3 * (client + far)):,.0f} runs/s on {CORES} cores before any PostgreSQL work")
    print(f"\nphysical limit, same run: raw single-row INSERT/s {limit1:,.0f} (1 connection), {limitn:,.0f} "
          f"({args.limit_conns} connections); insert-then-update steps/s {iu:,.0f} (1 connection)")
    for wf in args.workflows:
        k = f"tp_{wf}_{one}"
        runs_s, cpr = _med(reps, k, "runs_s"), _med(reps, k, "commits_per_run")
        print(f"ratios, {wf}: steps/s / 1-connection INSERT/s = {_fmt(3 * runs_s / limit1, '.2f')}; commits/s / "
              f"{args.limit_conns}-connection INSERT/s = {_fmt(runs_s * cpr / limitn, '.2f')}")
    if "rt" in res:
        print(f"in-process round trips / transactions per run, pass: {res['rt']['round_trips_per_run']:.2f} / "
              f"{res['rt']['transactions_per_run']:.2f}; steps with an effect: "
              f"{res['rt_effect']['round_trips_per_run']:.2f} / {res['rt_effect']['transactions_per_run']:.2f} "
              f"({res['rt_effect']['runs_s']:,.0f} runs/s in-process)")
    if "parked" in res:
        p = res["parked"]
        print(f"RSS MB: idle / {args.parked:,} parked / after {args.cycles} wake cycles: {p['rss_before']:.0f} / "
              f"{p['rss_parked']:.0f} / {' '.join(f'{x:.0f}' for x in p['rss_cycles'])}")
