"""Durable timers under load (issue 27's done-when, docs/timers.md): N runs whose sleeps (`sleep: {until: ...}`)
all come due in the same 10 s window, on two real daemons, one killed with `kill -9` in the middle of the window.
Checks that every timer fired exactly once and prints the lateness (fired - the due instant stored when the sleep
opened): p50, p99, max, and the p99 of the runs the killed daemon did not hold.

    python bench/bench_timers.py                     # 5,000 timers (a quick run)
    python bench/bench_timers.py --timers 100000     # the issue's size
    python bench/bench_timers.py --lease 5s --concurrency 64 --window 10
    python bench/bench_timers.py --visit-fire        # timers fired only by visits (as before 0035), to compare

Besides the lateness it prints where the time went, from PostgreSQL's own counters (`track_functions`): the
calls and milliseconds of the claim (lease_claim), the visits' commits (engine_commit / engine_commit_many), the
fires inside a visit (engine_op_sleep_fire) and the set fires (timer_fire_due, migration 0035); and the machine's
limit measured in the same run on the same server: bare single-row UPDATE statements per second (one and four
connections, each its own commit) and rows per second of one set UPDATE -- with the load average before and after.

A throwaway embedded PostgreSQL (bench/scratch_db.py, fsync off); the daemons are bench/runtime_daemon.py (the
`serve` Daemon without the CLI). The runs are created first, then the daemons open every sleep (one commit each)
and release the runs; the window starts `--lead` seconds plus `--timers / --open-rate` after creation ends,
enough for the opens (a run whose sleep opened late fires late, and counts; 100,000 opens take minutes here). Runs a killed daemon held mid-fire wait out their lease (`--lease`):
the goal is p99 <= 2 s, which such a handful does not move.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scratch_db import run_on_scratch_database  # noqa: E402

from anthares44.automation.compiler.ir import to_json  # noqa: E402
from anthares44.automation.compiler.lint import compile_sources  # noqa: E402
from anthares44.automation.compiler.source import load_text  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402

PROJECT = "pj_default"
WORKFLOW = """\
name: timers
version: 1
steps:
  - id: nap
    sleep: {until: "{{ input.at }}"}
  - id: done
    uses: pass
    timeout: 15s
"""


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


# --visit-fire: the set fire does nothing, so every timer fires inside a visit (runtime_daemon.py's A44_BENCH_SQL)
NO_SET_FIRE = """create or replace function automation.timer_fire_due(p_now timestamptz, p_limit integer)
returns integer language sql as 'select 0'"""

PROFILED = ("lease_claim", "engine_commit", "engine_commit_many", "engine_op_sleep_fire", "engine_op_sleep_open",
            "timer_fire_due")


class Daemon:
    def __init__(self, url: str, home: Path, name: str, concurrency: int, lease: str, sql: Path | None = None,
                 no_yield: bool = False, lanes: int | None = None):
        self.log = home / f"{name}.log"
        env = {**os.environ, "A44_HOME": str(home), "A44_WORKER_ID": name, "A44_LEASE_TIMEOUT": lease}
        if no_yield:
            env["A44_BENCH_TIMER_YIELD"] = "0"
        if lanes is not None:
            env["A44_BENCH_TIMER_LANES"] = str(lanes)
        if sql is not None:
            env["A44_BENCH_SQL"] = str(sql)
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "runtime_daemon.py"), url,
                                      str(concurrency)], stdout=subprocess.DEVNULL, stderr=open(self.log, "w"),
                                     env=env)
        deadline = time.monotonic() + 60
        while "serving" not in self.log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"daemon {name} did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)


async def create(store: Store, workflow_id: str, n: int, window_start: datetime, window_s: float) -> None:
    rng = random.Random(27)
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        at = window_start + timedelta(seconds=rng.random() * window_s)
        async with sem:
            await store.create_run(PROJECT, workflow_id, {"at": at.isoformat()}, f"t-{i}")

    await asyncio.gather(*(one(i) for i in range(n)))


async def profile(conn) -> dict[str, tuple[int, float]]:
    """{function: (calls, total ms)} of PROFILED since the statistics were reset (track_functions = all)."""
    rows = await conn.fetch("select funcname, calls, total_time from pg_stat_user_functions "
                            "where schemaname = 'automation' and funcname = any($1::text[])", list(PROFILED))
    return {r["funcname"]: (r["calls"], r["total_time"]) for r in rows}


async def _updates(conn, first: int, step: int, stop: float) -> int:
    """Single-row UPDATEs (each its own commit) on `conn` until `stop` (monotonic); how many."""
    k, n = first, 0
    while time.monotonic() < stop:
        await conn.execute("update bench_bare set v = v + 1, t = $2 where id = $1", k % 20000 + 1, datetime.now(UTC))
        k, n = k + step, n + 1
    return n


async def physical(url: str, seconds: float = 3.0) -> dict[str, float]:
    """The server's own limit here, now: single-row UPDATEs per second, each its own commit, on 1 and on 4
    connections (the round trip included), and rows per second of one UPDATE of 20,000 rows."""
    import asyncpg

    out: dict[str, float] = {}
    setup = await asyncpg.connect(url)
    await setup.execute("drop table if exists bench_bare; create table bench_bare (id int primary key, v int, "
                        "t timestamptz); insert into bench_bare select g, 0, null from generate_series(1, 20000) g")
    for conns in (1, 4):
        cs = [await asyncpg.connect(url) for _ in range(conns)]
        counts = await asyncio.gather(*(_updates(c, i, conns, time.monotonic() + seconds) for i, c in enumerate(cs)))
        out[f"updates/s on {conns} connection(s)"] = sum(counts) / seconds
        for c in cs:
            await c.close()
    t0 = time.monotonic()
    await setup.execute("update bench_bare set v = v + 1, t = $1", datetime.now(UTC))
    out["rows/s of one set UPDATE (20,000 rows)"] = 20000 / (time.monotonic() - t0)
    await setup.execute("drop table bench_bare")
    await setup.close()
    return out


async def bench(url: str, args) -> None:
    load_before = os.getloadavg()
    store = await Store.connect(url, max_size=40, results_dir=Path(tempfile.mkdtemp(prefix="a44-timers-res-")))
    await store.migrate()
    await store.ensure_partitions()
    res = compile_sources([load_text(WORKFLOW, "timers.yaml")], "lint", lower=True)
    (ir,) = res.irs.values()
    await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    home = Path(tempfile.mkdtemp(prefix="a44-timers-home-"))
    sql = None
    if args.visit_fire:
        sql = home / "no_set_fire.sql"
        sql.write_text(NO_SET_FIRE)
    async with store.connection("bench") as conn:
        await conn.execute("alter database a44 set track_functions = 'all'")

    t0 = time.monotonic()
    window_start = datetime.now(UTC) + timedelta(
        seconds=args.lead + args.timers / args.create_rate + args.timers / args.open_rate)
    await create(store, ir.workflow_id, args.timers, window_start, args.window)
    print(f"created {args.timers} runs in {time.monotonic() - t0:.1f} s; window opens at {window_start:%H:%M:%S}")

    a = Daemon(url, home, "daemon-a", args.concurrency, args.lease, sql, args.no_yield, args.lanes)
    b = Daemon(url, home, "daemon-b", args.concurrency, args.lease, sql, args.no_yield, args.lanes)
    try:
        async with store.connection("bench") as conn:
            while True:
                sleeping = await conn.fetchval("select count(*) from automation.step_attempts "
                                               "where step_id = 'nap' and due_at is not null")
                if sleeping >= args.timers or datetime.now(UTC) >= window_start:
                    break
                await asyncio.sleep(0.5)
        print(f"{sleeping} sleeps open {(window_start - datetime.now(UTC)).total_seconds():.1f} s before the window")
        async with store.connection("bench") as conn:
            opened = await profile(conn)
        kill_at = window_start + timedelta(seconds=args.window / 2)
        await asyncio.sleep(max(0.0, (kill_at - datetime.now(UTC)).total_seconds()))
        a.kill()
        killed_at = datetime.now(UTC)
        print(f"kill -9 daemon-a at {killed_at:%H:%M:%S.%f}")
        deadline = time.monotonic() + args.window + 600
        async with store.connection("bench") as conn:
            while time.monotonic() < deadline:     # every timer fired (--until-done: every run finished too)
                # every run's nap succeeded (not "no nap attempt running": a run whose lease the killed daemon
                # held may for a moment have none, between its lost attempt and the next claim's)
                left = await conn.fetchval(
                    "select count(*) from automation.runs where state <> 'succeeded'" if args.until_done else
                    "select $1::int - count(distinct run_id) from automation.step_attempts "
                    "where step_id = 'nap' and status = 'succeeded'", *(() if args.until_done else (args.timers,)))
                if left == 0:
                    break
                await asyncio.sleep(0.5)
            fired = await conn.fetch("""
                select a.run_id, extract(epoch from a.finished_at - a.due_at)::float8 as late,
                       (select count(*) from automation.run_events e
                        where e.run_id = a.run_id and e.kind = 'attempt.finished' and e.step_id = 'nap'
                          and e.status = 'succeeded') as fires,
                       r.lease_reclaims > 0 as held_by_killed
                from automation.step_attempts a join automation.runs r on r.run_id = a.run_id
                where a.step_id = 'nap' and a.status = 'succeeded'""")
            states = dict(await conn.fetch("select state, count(*) from automation.runs group by 1"))
            attempts = await conn.fetchval("select count(*) from automation.step_attempts where step_id = 'nap'")
            span = await conn.fetchrow("select min(a.finished_at) as first, max(a.finished_at) as last, "
                                       "max(r.finished_at) as done from automation.step_attempts a "
                                       "join automation.runs r using (run_id) where a.step_id = 'nap'")
            after = await profile(conn)
    finally:
        a.stop()
        b.stop()
        await store.close()

    late = [r["late"] for r in fired]
    once = sum(1 for r in fired if r["fires"] == 1)
    spared = [r["late"] for r in fired if not r["held_by_killed"]]
    print(f"runs by state: {states}; nap attempts {attempts}; fired {len(fired)}, exactly once {once}, "
          f"more than once {sum(1 for r in fired if r['fires'] > 1)}")
    print(f"lateness s: p50 {pct(late, 50):.3f}  p99 {pct(late, 99):.3f}  max {max(late, default=float('nan')):.3f}"
          f"  ({len(fired) - len(spared)} runs daemon-a held when killed waited out its lease; the others: "
          f"p99 {pct(spared, 99):.3f})")
    fire_s = (span["last"] - span["first"]).total_seconds() if fired else float("nan")
    print(f"fired in {fire_s:.1f} s from the first fire to the last ({len(fired) / max(fire_s, 1e-9):.0f} fires/s "
          f"over that span, the window {args.window:g} s)" + (
              f"; the runs' next step done {(span['done'] - span['last']).total_seconds():.1f} s after the last fire"
              if args.until_done else ""))
    print("database time from the window on (track_functions; nested calls counted inside their callers):")
    for name in PROFILED:
        calls = after.get(name, (0, 0.0))[0] - opened.get(name, (0, 0.0))[0]
        ms = after.get(name, (0, 0.0))[1] - opened.get(name, (0, 0.0))[1]
        if calls:
            print(f"  {name:22s} {calls:8d} calls {ms:10.0f} ms  {ms / calls:7.2f} ms/call")
    limits = await physical(url)
    print("this machine's limit, measured now on the same server: "
          + "; ".join(f"{k} {v:.0f}" for k, v in limits.items()))
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, after "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" ({os.cpu_count()} cores)")
    ok = once == args.timers and len(fired) == args.timers
    print("PASS: every timer fired exactly once" if ok else "FAIL: a timer fired twice or never")
    if not ok:
        print(f"runs not fired exactly once: {[r['run_id'] for r in fired if r['fires'] != 1][:20]}; "
              f"timers fired {len(fired)} of {args.timers} (the wait ended after {args.window + 600:g} s)")
        raise SystemExit(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timers", type=int, default=5_000, help="runs, all due in one window (100000: the issue's)")
    p.add_argument("--window", type=float, default=10.0, help="seconds the due instants are spread over")
    p.add_argument("--lead", type=float, default=20.0, help="seconds after creation for the daemons to open sleeps")
    p.add_argument("--create-rate", type=float, default=800.0, help="expected runs created per second (lead time)")
    p.add_argument("--open-rate", type=float, default=400.0, help="expected sleeps opened per second (lead time)")
    p.add_argument("--until-done", action="store_true",
                   help="wait for every run's next step too (minutes at 100,000), not only for every fire")
    p.add_argument("--visit-fire", action="store_true", help="no set fire (0035): every timer fires in a visit")
    p.add_argument("--no-yield", action="store_true",
                   help="claims never yield to overdue timers (as before; timer_firing.YIELD = 0), to compare")
    p.add_argument("--lanes", type=int, default=None,
                   help="set-fire batches in flight per daemon while behind (timer_firing.LANES), to compare")
    p.add_argument("--concurrency", type=int, default=64, help="runs in flight per daemon")
    p.add_argument("--lease", default="5s", help="the daemons' lease (a killed daemon's runs wait it out)")
    args = p.parse_args()
    run_on_scratch_database("a44-bench-timers-", lambda url: bench(url, args))


if __name__ == "__main__":
    main()
