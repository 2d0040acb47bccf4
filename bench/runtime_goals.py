"""Issue 32's table (helper of bench_runtime.py): a44 against DBOS in its best mode per workflow and against
Restate, from the same run's interleaved repeats. A ratio is taken within each repeat (the same minute of the same
machine) and the table quotes the median over repeats, the spread beside it; absolute figures are medians too and
only context. Each row has the figure the issue was filed with and its goal."""

from __future__ import annotations

import math
import statistics


def _get(rep: dict, key: str, field: str) -> float:
    v = rep.get(key, {}).get(field)
    return math.nan if v is None else float(v)


def _med(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else math.nan


def _span(xs: list[float], spec: str) -> str:
    xs = [x for x in xs if x == x]
    if not xs:
        return "-"
    return f"{format(_med(xs), spec)} ({format(min(xs), spec)}-{format(max(xs), spec)})" if len(xs) > 1 \
        else format(xs[0], spec)


def _f(x: float, spec: str) -> str:
    return "-" if x != x else format(x, spec)


def _verdict(x: float, goal: float, at_least: bool) -> str:
    if x != x:
        return "not measured"
    return "met" if (x >= goal if at_least else x <= goal) else "not met"


def table(res: dict, args) -> None:
    reps = res["reps"]
    one = min(args.daemons)
    two = next((d for d in args.daemons if d == 2 * one), None)

    def ratio(ka, fa, kb, fb):
        return [_get(r, ka, fa) / _get(r, kb, fb) for r in reps]

    rows = []

    def row(measure, a44, peer, ratios, spec, issue, goal, goal_x, at_least):
        m = _med(ratios)
        rows.append(f"| {measure} | {a44} | {peer} | {_span(ratios, spec)} | {issue} | {goal} | "
                    f"{_verdict(m, goal_x, at_least)} |")

    def runs(k):
        return _f(_med([_get(r, k, "runs_s") for r in reps]), ",.0f")

    def lat(k, f):
        return _f(_med([_get(r, k, f) for r in reps]), ".1f") + " ms"

    for wf, label, now, goal in (("pass", "3-step no-op runs/s vs DBOS", "5.1x", 10),
                                 ("http", "3-step HTTP runs/s vs DBOS", "3.3x", 6),
                                 ("sql", "3-step SQL-insert runs/s vs DBOS (one transaction per step)", "2.9x", 6)):
        if wf in args.workflows:
            mode = next((r[f"dbos_{wf}"]["mode"] for r in reps if f"dbos_{wf}" in r), "-")
            row(f"{label} [DBOS {mode}]", runs(f"tp_{wf}_{one}"), runs(f"dbos_{wf}"),
                ratio(f"tp_{wf}_{one}", "runs_s", f"dbos_{wf}", "runs_s"), ".2f", now, f">= {goal}x", goal, True)
    row("one run at a time, HTTP, p50 vs DBOS", lat("lat_http", "lat_p50"), lat("dbos_http", "lat_p50"),
        ratio("lat_http", "lat_p50", "dbos_http", "lat_p50"), ".2f", "0.83x", "<= 0.5x", 0.5, False)
    row("3-step HTTP runs/s vs Restate (queued, then drained)", runs(f"tp_http_{one}"), runs("restate_http"),
        ratio(f"tp_http_{one}", "runs_s", "restate_http", "runs_s"), ".2f", "1.06x", ">= 2x", 2, True)
    row("one run at a time, HTTP, p99 vs Restate", lat("lat_http", "lat_p99"), lat("restate_http", "lat_p99"),
        ratio("lat_http", "lat_p99", "restate_http", "lat_p99"), ".2f", "1.10x", "<= 0.8x", 0.8, False)
    k = f"tp_http_{one}"
    d = [_get(r, k, "daemon_cpu_ms_per_run") for r in reps]
    p = [_get(r, k, "pg_cpu_ms_per_run") for r in reps]
    cpu_met = "not measured" if _med(d) != _med(d) else (
        "met" if _med(d) <= 0.7 and _med(p) <= 0.7 else "not met")
    rows.append(f"| CPU per 3-step HTTP run, daemon + PostgreSQL | {_span(d, '.2f')} + {_span(p, '.2f')} ms | | | "
                f"1.06 + 1.53 ms | <= 0.7 + 0.7 ms | {cpu_met} |")
    if "sql" in args.workflows:
        c = [_get(r, f"tp_sql_{one}", "app_commits_per_step") for r in reps]
        row("commits per `sql/execute` step in the application database", _span(c, ".2f"), "", c, ".2f", "2", "1",
            1.05, False)
    if two:
        for wf in args.workflows:
            rs = ratio(f"tp_{wf}_{two}", "runs_s", f"tp_{wf}_{one}", "runs_s")
            c1 = _med([_get(r, f"tp_{wf}_{one}", "commits_per_run") for r in reps])
            c2 = _med([_get(r, f"tp_{wf}_{two}", "commits_per_run") for r in reps])
            met = _verdict(_med(rs), 1.0, True)
            if met == "met" and c2 > c1 * 1.05:
                met = "not met (commits)"
            rows.append(f"| {two} daemons vs {one}, {wf}: runs/s; commits/run | {runs(f'tp_{wf}_{two}')} vs "
                        f"{runs(f'tp_{wf}_{one}')}; {_f(c2, '.2f')} vs {_f(c1, '.2f')} | | {_span(rs, '.2f')} | "
                        f"0.96-1.08x; pass 1.15 -> 2.22, HTTP 0.43 -> 2.92 | >= 1.0x, commits/run not above one "
                        f"daemon's | {met} |")
    if "parked" in res:
        rss = res["parked"]["rss_before"]
        rows.append(f"| idle daemon RSS | {rss:.0f} MB | | | 72 MB | <= 45 MB | {_verdict(rss, 45, False)} |")
    fr = [_get(r, "fan_pass", "rows_item") for r in reps]
    if any(x == x for x in fr):
        row("rows written per `pass` partition", _span(fr, ".2f"), "", fr, ".2f", "6", "<= 3", 3, False)
    print(f"\n## issue 32: a44 vs DBOS at its best and Restate, {len(reps)} interleaved repeats (ratio: median over "
          "repeats of the ratio within each, range in brackets)")
    print("| measure | a44 | peer | ratio | issue (filed) | goal | |")
    print("|---|---|---|---|---|---|---|")
    for line in rows:
        print(line)
    context = []
    for wf in args.workflows:
        for peer, key in (("DBOS unbounded (every run started at once)", f"dbos_{wf}_unbounded"),
                          ("Restate", f"restate_{wf}")):
            rs = ratio(f"tp_{wf}_{one}", "runs_s", key, "runs_s")
            if any(x == x for x in rs):
                context.append(f"{wf} runs/s vs {peer}: {_span(rs, '.2f')}x ({runs(f'tp_{wf}_{one}')} vs {runs(key)})")
    for wf in args.latency_workflows:
        for peer in ("dbos", "restate"):
            for f in ("lat_p50", "lat_p99"):
                rs = ratio(f"lat_{wf}", f, f"{peer}_{wf}", f)
                if any(x == x for x in rs):
                    context.append(f"one at a time {wf} {f[4:]} vs {peer}: {_span(rs, '.2f')}x "
                                   f"({lat(f'lat_{wf}', f)} vs {lat(f'{peer}_{wf}', f)})")
    if context:
        print("context, same run: " + "; ".join(context))
