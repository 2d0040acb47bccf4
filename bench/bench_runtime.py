"""Runtime benchmark (issue 3, "Speed and memory"). Not a test: it prints figures.

    .venv/bin/python bench/bench_runtime.py                  # product defaults (fsync on, synchronous_commit on)
    .venv/bin/python bench/bench_runtime.py --repeat 5 --also-non-durable
    .venv/bin/python bench/bench_runtime.py --quick          # smaller numbers, a smoke run

It starts its own embedded PostgreSQL (`EmbeddedServer`, temp dir, same settings as `a44 automation db start`:
durable = fsync, synchronous_commit and full_page_writes at PostgreSQL's defaults, i.e. on), and in the same run
measures:
  (a) the physical limit: raw single-row INSERTs/s from asyncpg (one connection, autocommit; N connections in
      parallel), and "insert, then update" per step on one connection (the issue's reference shape);
  (b) runs/s and steps/s of a 3-step `pass` workflow, 2,000 runs created at once while the daemon is paused
      (SIGSTOP), then driven by ONE real `a44 automation serve` subprocess (SIGCONT .. last finished_at);
  (c) p50/p99 latency from `create_run` to completion, one run at a time, with that daemon idle;
  (d) the daemon's peak RSS (VmHWM) during (b);
  (e) RSS of a fresh daemon before / after parking 10,000 runs in a 1-hour `sleep`, and after wake/claim cycles
      (each cycle makes every sleeping run due now: the daemon re-grants it, rebuilds it from the log and
      parks it again);
  (f) commits per run: pg_stat_database.xact_commit delta over (b), minus the benchmark's own polls, / runs;
      round trips per run counted in-process (bench/runtime_roundtrips.py).
Figures of each repeat are printed; the summary quotes medians.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
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

from anthares44.automation.runtime.embedded import EmbeddedServer, free_port  # noqa: E402
from anthares44.automation.runtime.store import Store  # noqa: E402

A44 = str(Path(sys.executable).parent / "a44")
PROJECT = "pj_default"
REFERENCE = {  # issue 3, same 2-core machine, same embedded PostgreSQL
    "dbos_runs_s": 200, "dbos_steps_s": 600, "dbos_async_runs_s": 100, "dbos_commits_per_run": 7,
    "dbos_round_trips_per_run": 37, "dbos_latency_ms": 6, "asyncpg_insert_update_steps_s": 5700,
}
TARGET = {"runs_s": 500, "steps_s": 1500, "p50_ms": 10, "rss_mb": 150}

PASS_WF = """
name: bench-pass
version: 1
steps:
  - { id: s1, uses: pass, timeout: 5s, output: { n: 1 } }
  - { id: s2, uses: pass, timeout: 5s, output: { n: "{{ steps.s1.output.n }}" } }
  - { id: s3, uses: pass, timeout: 5s, output: { n: 3 } }
"""
SLEEP_WF = """
name: bench-sleep
version: 1
steps:
  - { id: nap, sleep: 1h }
  - { id: after, uses: pass, timeout: 5s, output: { ok: true } }
"""
DAEMON_CMD = ["a44"]   # or "module": bench/runtime_daemon.py (same Daemon, no CLI parsing)
SQL_WF = """
name: bench-sql
version: 1
steps:
  - { id: s1, uses: sql/execute, timeout: 5s, query: "select $1::int as n", params: [1] }
  - { id: s2, uses: sql/execute, timeout: 5s, query: "select $1::int as n", params: [2] }
  - { id: s3, uses: sql/execute, timeout: 5s, query: "select $1::int as n", params: [3] }
"""
TERMINAL = ("succeeded", "failed", "compensation_failed", "cancelled")


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


# --- (a) the physical limit -------------------------------------------------------------------------------------
async def raw_inserts(url: str, conns: int, seconds: float) -> float:
    setup = await asyncpg.connect(url)
    await setup.execute("create table if not exists bench_raw (id bigserial primary key, v text not null)")
    await setup.close()
    cs = [await asyncpg.connect(url) for _ in range(conns)]
    stop = time.perf_counter() + seconds
    counts = [0] * conns

    async def loop(i, c):
        while time.perf_counter() < stop:
            await c.execute("insert into bench_raw (v) values ($1)", "x")
            counts[i] += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(loop(i, c) for i, c in enumerate(cs)))
    dt = time.perf_counter() - t0
    for c in cs:
        await c.close()
    return sum(counts) / dt


async def insert_then_update(url: str, seconds: float) -> float:
    """The issue's reference shape: per step, INSERT its row (running), then UPDATE it (done): 2 commits/step."""
    c = await asyncpg.connect(url)
    await c.execute("create table if not exists bench_steps (id bigserial primary key, status text, result jsonb)")
    n, stop, t0 = 0, time.perf_counter() + seconds, time.perf_counter()
    while time.perf_counter() < stop:
        i = await c.fetchval("insert into bench_steps (status) values ('running') returning id")
        await c.execute("update bench_steps set status = 'succeeded', result = '{}' where id = $1", i)
        n += 1
    dt = time.perf_counter() - t0
    await c.close()
    return n / dt


# --- the daemon subprocess --------------------------------------------------------------------------------------
class DaemonProc:
    def __init__(self, url: str, home: Path, concurrency: int, extra: list[str] | None = None):
        self.log = home / f"daemon-{time.monotonic_ns()}.log"
        env = {**os.environ, "A44_HOME": str(home), "A44_DATABASE_URL": url, "A44_APP_DATABASE_URL": app_url_of(url)}
        cmd = [A44, "automation", "serve", "--database-url", url, "--concurrency", str(concurrency)]
        if DAEMON_CMD[0] == "module":
            cmd = [sys.executable, str(ROOT / "bench" / "runtime_daemon.py"), url, str(concurrency)]
        self.proc = subprocess.Popen([*cmd, *(extra or [])],
                                     stdout=subprocess.DEVNULL, stderr=open(self.log, "w"), env=env)
        deadline = time.monotonic() + 60
        while "serving" not in self.log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"daemon did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    def status(self, key: str) -> float:
        """A /proc/PID/status field in MB (VmRSS, VmHWM)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_s(self) -> float:
        """user + system CPU seconds of the daemon so far."""
        f = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)


def pg_cpu_s(postmaster: int) -> float:
    """CPU seconds of the PostgreSQL server: its live processes plus what exited children left in cutime/cstime."""
    tck, total = os.sysconf("SC_CLK_TCK"), 0.0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(d.name), int(f[1])
        if pid == postmaster:
            total += (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / tck
        elif ppid == postmaster:
            total += (int(f[11]) + int(f[12])) / tck
    return total


POSTMASTER = [0]


async def xact_commit(url: str) -> int:
    c = await asyncpg.connect(url)
    try:
        await c.execute("select pg_stat_clear_snapshot()")
        return await c.fetchval("select xact_commit from pg_stat_database where datname = current_database()")
    finally:
        await c.close()


async def settled_commits(url: str) -> int:
    """xact_commit once closed backends have flushed their counters (a backend flushes at exit): read until two
    reads 0.5 s apart differ only by the previous reader's own 2 statements. The returned read's own 2 commits
    are flushed later and must be subtracted by the caller."""
    a = await xact_commit(url)
    for _ in range(40):
        await asyncio.sleep(0.5)
        b = await xact_commit(url)
        if b - a <= 2:
            return b
        a = b
    return a


async def create_runs(store: Store, workflow_id: str, n: int, prefix: str, parallel: int = 8) -> list[str]:
    sem = asyncio.Semaphore(parallel)

    async def one(i):
        async with sem:
            return (await store.create_run(PROJECT, workflow_id, {"i": i}, f"{prefix}-{i}")).run_id

    return await asyncio.gather(*(one(i) for i in range(n)))


async def truncate(url: str) -> None:
    c = await asyncpg.connect(url)
    # cascade: every table that references a run (row counts, partitions, trace context...) empties with it
    await c.execute("truncate automation.step_attempts, automation.run_events, automation.idempotency_keys, "
                    "automation.runs cascade")
    await c.close()


# --- (c) latency ------------------------------------------------------------------------------------------------
async def latency(url: str, store: Store, n: int) -> tuple[list[float], list[float]]:
    """Client-observed (create_run .. the bench sees the terminal state via LISTEN) and recorded
    (runs.finished_at - runs.created_at) latencies in ms, one run at a time."""
    listen = await asyncpg.connect(url)
    waiting: dict[str, asyncio.Event] = {}
    listen_loop = asyncio.get_running_loop()

    def on_event(conn, pid, channel, payload):
        ev = waiting.get(payload)
        if ev is not None:
            listen_loop.call_soon(ev.set)

    await listen.add_listener("a44_run_events", on_event)
    check = await asyncpg.connect(url)
    observed, recorded = [], []
    for i in range(n):
        key = f"lat-{time.monotonic_ns()}-{i}"
        ev = asyncio.Event()
        t0 = time.perf_counter()
        run_id = (await store.create_run(PROJECT, "wf_bench_pass", {"i": i}, key)).run_id
        waiting[run_id] = ev
        while True:
            row = await check.fetchrow("select state, finished_at - created_at as d from automation.runs "
                                       "where run_id = $1", run_id)
            if row["state"] in TERMINAL:
                break
            ev.clear()
            try:
                await asyncio.wait_for(ev.wait(), 2.0)
            except asyncio.TimeoutError:
                pass
        observed.append((time.perf_counter() - t0) * 1000)
        recorded.append(row["d"].total_seconds() * 1000)
        del waiting[run_id]
        await asyncio.sleep(0.01)       # idle between runs
    await listen.close()
    await check.close()
    return observed, recorded


# --- (b) throughput ---------------------------------------------------------------------------------------------
async def throughput(url: str, home: Path, n: int, concurrency: int, latency_n: int,
                     workflow: str = "wf_bench_pass") -> dict:
    await truncate(url)
    out: dict = {}
    store = await Store.connect(url, min_size=2, max_size=8, results_dir=home / "results")
    if latency_n:
        d = DaemonProc(url, home, concurrency)
        try:
            await asyncio.sleep(0.5)
            obs, rec = await latency(url, store, latency_n)
            out.update(lat_p50=pct(obs, 50), lat_p99=pct(obs, 99), lat_rec_p50=pct(rec, 50), lat_rec_p99=pct(rec, 99))
        finally:
            d.stop()
    # a fresh daemon for the throughput, so that no counter of the latency phase is flushed into its delta
    d = DaemonProc(url, home, concurrency)
    try:
        d.pause()
        t_create = time.perf_counter()
        await create_runs(store, workflow, n, f"tp-{time.monotonic_ns()}")
        out["create_s"] = n / (time.perf_counter() - t_create)
        await store.close()
        x0 = await settled_commits(url)
        poll = await asyncpg.connect(url)
        polls = 0
        cpu0, pg0 = d.cpu_s(), pg_cpu_s(POSTMASTER[0])
        t0 = time.time()
        d.resume()
        rss_peak = 0.0
        while True:
            await asyncio.sleep(0.05)
            rss_peak = max(rss_peak, d.status("VmRSS"))
            left = await poll.fetchval("select count(*) from automation.runs where workflow_id = $1 "
                                       "and state not in ('succeeded', 'failed', 'compensation_failed', 'cancelled')",
                                       workflow)
            polls += 1
            if left == 0:
                break
            if time.time() - t0 > 600:
                raise RuntimeError("runs did not finish in 10 minutes")
        last = await poll.fetchval("select extract(epoch from max(finished_at)) from automation.runs "
                                   "where workflow_id = $2 and run_id in (select run_id from "
                                   "automation.runs order by created_at desc limit $1)", n, workflow)
        bad = await poll.fetchval("select count(*) from automation.runs where state <> 'succeeded'")
        polls += 2
        await poll.close()
        out["daemon_cpu_ms_per_run"] = (d.cpu_s() - cpu0) * 1000 / n
        out["pg_cpu_ms_per_run"] = (pg_cpu_s(POSTMASTER[0]) - pg0) * 1000 / n
        out["hwm_mb"] = d.status("VmHWM")
        out["rss_peak_mb"] = rss_peak
        d.stop()
        x1 = await settled_commits(url)
        elapsed = float(last) - t0
        out.update(runs_s=n / elapsed, steps_s=3 * n / elapsed, elapsed_s=elapsed, failed=bad,
                   commits_per_run=(x1 - x0 - polls - 2) / n)
    finally:
        d.stop()
    return out


# --- (e) parked runs --------------------------------------------------------------------------------------------
async def parked(url: str, home: Path, n: int, concurrency: int, cycles: int) -> dict:
    await truncate(url)
    d = DaemonProc(url, home, concurrency)
    out: dict = {}
    try:
        c = await asyncpg.connect(url)

        async def wait_all(grants: int):
            while True:
                await asyncio.sleep(0.2)
                done = await c.fetchval("select count(*) from automation.runs where workflow_id = 'wf_bench_sleep' "
                                        "and state = 'sleeping' and lease_grants >= $1", grants)
                if done >= n:
                    return

        await asyncio.sleep(1.0)
        out["rss_before"] = d.status("VmRSS")
        store = await Store.connect(url, min_size=2, max_size=8, results_dir=home / "results")
        t0 = time.perf_counter()
        await create_runs(store, "wf_bench_sleep", n, f"park-{time.monotonic_ns()}")
        await store.close()
        await wait_all(1)
        out["park_s"] = time.perf_counter() - t0
        await asyncio.sleep(1.0)
        out["rss_parked"] = d.status("VmRSS")
        out["rss_cycles"] = []
        for k in range(cycles):
            await c.execute("update automation.runs set next_wake_at = now() where state = 'sleeping'")
            await wait_all(k + 2)
            await asyncio.sleep(1.0)
            out["rss_cycles"].append(d.status("VmRSS"))
        out["hwm"] = d.status("VmHWM")
        await c.close()
    finally:
        d.stop()
    return out


# --- setup ------------------------------------------------------------------------------------------------------
async def prepare(url: str, home: Path, files: dict[str, str] | None = None) -> None:
    """Migrate the benchmark database and publish `files` (name -> YAML text; default: this bench's three)."""
    from anthares44.automation.app.publishing import publish

    store = await Store.connect(url, results_dir=home / "results")
    await store.migrate()
    await store.ensure_partitions()
    wf = home / "wf"
    wf.mkdir(exist_ok=True)
    files = files or {"bench-pass.yaml": PASS_WF, "bench-sleep.yaml": SLEEP_WF, "bench-sql.yaml": SQL_WF}
    for name, text in files.items():
        (wf / name).write_text(text)
    report = await publish(store, PROJECT, [str(wf)])
    if report.errors:
        raise SystemExit(f"publish failed: {[d.to_dict() for d in report.diagnostics]}")
    await store.close()


def app_url_of(url: str) -> str:
    """The application database (where the sql workflow's statements run) beside the bench's control store."""
    return url.replace("postgres@", "a44_app@", 1).rsplit("/", 1)[0] + "/a44_app"


def start_server(root: Path, durable: bool) -> tuple[EmbeddedServer, str]:
    server = EmbeddedServer(root, durable=durable)
    server.initdb()
    port = free_port()
    POSTMASTER[0] = server.start(port).pid
    admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    async def mk():
        c = await asyncpg.connect(admin)
        await c.execute("create database a44")
        await c.execute("create role a44_app login")
        await c.execute("create database a44_app owner a44_app")
        settings = {r["name"]: r["setting"] for r in await c.fetch(
            "select name, setting from pg_settings where name in ('fsync', 'synchronous_commit', "
            "'full_page_writes', 'server_version', 'shared_buffers', 'wal_sync_method')")}
        await c.close()
        return settings

    settings = asyncio.run(mk())
    print(f"# embedded PostgreSQL {settings.get('server_version')} in {root}: durable={durable} "
          f"fsync={settings.get('fsync')} synchronous_commit={settings.get('synchronous_commit')} "
          f"full_page_writes={settings.get('full_page_writes')} wal_sync_method={settings.get('wal_sync_method')}")
    return server, f"postgresql://postgres@127.0.0.1:{port}/a44"


def bench(durable: bool, args) -> dict:
    root = Path(tempfile.mkdtemp(prefix="a44-bench-"))
    home = root / "home"
    home.mkdir()
    server, url = start_server(root / "pg", durable)
    res: dict = {"durable": durable, "reps": []}
    try:
        asyncio.run(prepare(url, home))
        for r in range(args.repeat):
            limit1 = asyncio.run(raw_inserts(url, 1, args.limit_seconds))
            limitn = asyncio.run(raw_inserts(url, args.limit_conns, args.limit_seconds))
            iu = asyncio.run(insert_then_update(url, args.limit_seconds))
            tp = asyncio.run(throughput(url, home, args.runs, args.concurrency, args.latency_runs))
            rep = {"limit1": limit1, "limitn": limitn, "insert_update": iu, **tp}
            res["reps"].append(rep)
            print(f"  rep {r + 1}: raw INSERT/s 1 conn {limit1:,.0f}, {args.limit_conns} conns {limitn:,.0f}; "
                  f"insert+update steps/s {iu:,.0f} | runs/s {tp['runs_s']:,.0f} steps/s {tp['steps_s']:,.0f} "
                  f"({tp['elapsed_s']:.2f}s, not succeeded {tp['failed']}) | latency p50 {tp.get('lat_p50', 0):.1f} "
                  f"p99 {tp.get('lat_p99', 0):.1f} ms (recorded p50 {tp.get('lat_rec_p50', 0):.1f}) | "
                  f"HWM {tp['hwm_mb']:.0f} MB | commits/run {tp['commits_per_run']:.2f} | "
                  f"create_run/s {tp['create_s']:,.0f} | daemon CPU {tp['daemon_cpu_ms_per_run']:.2f} ms/run "
                  f"({tp['daemon_cpu_ms_per_run'] * tp['runs_s'] / 1000:.0%} of a core), PostgreSQL CPU "
                  f"{tp['pg_cpu_ms_per_run']:.2f} ms/run ({tp['pg_cpu_ms_per_run'] * tp['runs_s'] / 1000:.0%})", flush=True)
        if args.sql_runs:
            res["sql"] = asyncio.run(throughput(url, home, args.sql_runs, args.concurrency, 0, "wf_bench_sql"))
            q = res["sql"]
            print(f"  3-step sql/execute (`select $1`, steps with an effect): runs/s {q['runs_s']:,.0f} steps/s "
                  f"{q['steps_s']:,.0f} | commits/run {q['commits_per_run']:.2f} | HWM {q['hwm_mb']:.0f} MB | "
                  f"not succeeded {q['failed']}", flush=True)
        if args.parked:
            res["parked"] = asyncio.run(parked(url, home, args.parked, args.concurrency, args.cycles))
            p = res["parked"]
            print(f"  parked {args.parked}: RSS before {p['rss_before']:.1f} MB, parked {p['rss_parked']:.1f} MB, "
                  f"after cycles {', '.join(f'{x:.1f}' for x in p['rss_cycles'])} MB (HWM {p['hwm']:.1f}); "
                  f"created+parked in {p['park_s']:.1f}s", flush=True)
        if args.round_trips:
            from runtime_roundtrips import count_round_trips

            res["rt"] = asyncio.run(count_round_trips(url, home, args.round_trips))
            print(f"  in-process counts over {args.round_trips} runs: {res['rt']}", flush=True)
            res["rt_effect"] = asyncio.run(count_round_trips(url, home, args.runs, effect=True))
            print(f"  in-process, steps with an effect (pass not inlined), {args.runs} runs: {res['rt_effect']}",
                  flush=True)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return res


def summary(res: dict, args) -> None:
    reps = res["reps"]
    m = {k: median([r[k] for r in reps]) for k in reps[0] if isinstance(reps[0][k], (int, float))}
    label = "product defaults (fsync on, synchronous_commit on)" if res["durable"] else \
        "durable=False (fsync off, synchronous_commit off) - comparison only"
    print(f"\n## {label}: medians of {len(reps)} repeats; daemon = one "
          f"{'`a44 automation serve`' if DAEMON_CMD[0] == 'a44' else 'bench/runtime_daemon.py (Daemon.serve)'} "
          f"subprocess, --concurrency {args.concurrency}")
    rows = [
        ("raw INSERT/s, 1 connection (limit)", f"{m['limit1']:,.0f}", "", ""),
        (f"raw INSERT/s, {args.limit_conns} connections (limit)", f"{m['limitn']:,.0f}", "", ""),
        ("insert-then-update steps/s, 1 connection", f"{m['insert_update']:,.0f}",
         f"{REFERENCE['asyncpg_insert_update_steps_s']:,}", ""),
        ("runs/s (3-step pass, 2,000 at once)", f"{m['runs_s']:,.0f}",
         f"DBOS {REFERENCE['dbos_runs_s']}", f">= {TARGET['runs_s']}"),
        ("steps/s", f"{m['steps_s']:,.0f}", f"DBOS {REFERENCE['dbos_steps_s']}", f">= {TARGET['steps_s']}"),
        ("commits/run (pg_stat_database)", f"{m['commits_per_run']:.2f}", f"DBOS {REFERENCE['dbos_commits_per_run']}",
         "few"),
        ("latency p50 / p99 ms, idle (client-observed)", f"{m['lat_p50']:.1f} / {m['lat_p99']:.1f}",
         f"DBOS {REFERENCE['dbos_latency_ms']}", f"p50 < {TARGET['p50_ms']}"),
        ("latency p50 / p99 ms, recorded finished-created", f"{m['lat_rec_p50']:.1f} / {m['lat_rec_p99']:.1f}", "", ""),
        ("CPU ms per run during the 2,000: daemon / PostgreSQL",
         f"{m['daemon_cpu_ms_per_run']:.2f} / {m['pg_cpu_ms_per_run']:.2f}", "", ""),
        ("daemon peak RSS MB (VmHWM) during the 2,000", f"{m['hwm_mb']:.0f}", "", f"< {TARGET['rss_mb']}"),
    ]
    if "parked" in res:
        p = res["parked"]
        rows.append((f"RSS MB: idle / {args.parked:,} parked / after {args.cycles} wake cycles",
                     f"{p['rss_before']:.0f} / {p['rss_parked']:.0f} / {' '.join(f'{x:.0f}' for x in p['rss_cycles'])}",
                     "", "no growth"))
    if "rt" in res:
        rows.append(("round trips / transactions per run (in-process count)",
                     f"{res['rt']['round_trips_per_run']:.2f} / {res['rt']['transactions_per_run']:.2f}",
                     f"DBOS {REFERENCE['dbos_round_trips_per_run']} / {REFERENCE['dbos_commits_per_run']}", ""))
    if "sql" in res:
        q = res["sql"]
        rows.append(("3-step sql/execute `select $1` (effect path, daemon): runs/s, steps/s, commits/run",
                     f"{q['runs_s']:,.0f}, {q['steps_s']:,.0f}, {q['commits_per_run']:.2f}", "", ""))
    if "rt_effect" in res:
        e = res["rt_effect"]
        rows.append(("steps with an effect (in-process Engine, 2,000 runs): runs/s, steps/s",
                     f"{e['runs_s']:,.0f}, {3 * e['runs_s']:,.0f}", "", ""))
        rows.append(("steps with an effect: round trips / transactions per run",
                     f"{e['round_trips_per_run']:.2f} / {e['transactions_per_run']:.2f}", "", ""))
    w = max(len(r[0]) for r in rows)
    print(f"| {'figure':<{w}} | ours | reference | target |\n|{'-' * (w + 2)}|---|---|---|")
    for r in rows:
        print(f"| {r[0]:<{w}} | {r[1]} | {r[2]} | {r[3]} |")
    print(f"ratios: runs/s / DBOS = {m['runs_s'] / REFERENCE['dbos_runs_s']:.2f}x; steps/s / raw 1-conn INSERT/s = "
          f"{m['steps_s'] / m['limit1']:.2f}; steps/s / raw {args.limit_conns}-conn INSERT/s = "
          f"{m['steps_s'] / m['limitn']:.2f}; commits/s / raw {args.limit_conns}-conn INSERT/s = "
          f"{m['runs_s'] * m['commits_per_run'] / m['limitn']:.2f}; steps/s / insert+update = "
          f"{m['steps_s'] / m['insert_update']:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--latency-runs", type=int, default=200)
    ap.add_argument("--parked", type=int, default=10_000)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64, help="the daemon's --concurrency (runs in flight)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit-seconds", type=float, default=2.0)
    ap.add_argument("--limit-conns", type=int, default=8)
    ap.add_argument("--round-trips", type=int, default=200, help="runs for the in-process round-trip count (0: skip)")
    ap.add_argument("--sql-runs", type=int, default=2000,
                    help="runs of a 3-step sql/execute workflow through the daemon (steps with an effect; 0: skip)")
    ap.add_argument("--also-non-durable", action="store_true", help="repeat everything with durable=False")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--daemon", choices=("a44", "module"), default="a44",
                    help="a44: `a44 automation serve`; module: bench/runtime_daemon.py (the same Daemon, used "
                         "automatically when the a44 entry point does not start)")
    args = ap.parse_args()
    DAEMON_CMD[0] = args.daemon
    if args.daemon == "a44" and subprocess.run([A44, "automation", "serve", "--help"], capture_output=True).returncode:
        print("# `a44 automation serve --help` fails in this tree; using bench/runtime_daemon.py (same Daemon)")
        DAEMON_CMD[0] = "module"
    if args.quick:
        args.runs, args.latency_runs, args.parked, args.repeat, args.limit_seconds = 500, 50, 1000, 1, 1.0
        args.sql_runs = 500
    results = [bench(True, args)]
    if args.also_non_durable:
        results.append(bench(False, args))
    for res in results:
        summary(res, args)


if __name__ == "__main__":
    main()
