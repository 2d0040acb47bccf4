"""Runtime benchmark (issues 3, 16 and 32). Not a test: it prints figures, ending with issue 32's table.

    bash bench/install_peers.sh                              # once: DBOS and Restate into bench/.peers/ (gitignored)
    .venv/bin/python bench/bench_runtime.py                  # product defaults (fsync on, synchronous_commit on)
    .venv/bin/python bench/bench_runtime.py --quick          # 500 runs per figure, 3 repeats: a few minutes
    .venv/bin/python bench/bench_runtime.py --daemons 1,2,4  # the throughput figures with 1, 2 and 4 daemons

It starts its own embedded PostgreSQL (`EmbeddedServer`, temp dir, same settings as `a44 automation db start`:
durable = fsync, synchronous_commit and full_page_writes at PostgreSQL's defaults, i.e. on) and the far side of
the HTTP workflow (bench/runtime_far_side.py, a loopback aiohttp server in its own process). Each repeat measures,
interleaved (the summary quotes medians over repeats, and ratios taken within each repeat), with the machine's
1-minute load average before and after every block (the machine is shared):
  (a) the physical limit: raw single-row INSERTs/s from asyncpg (one connection, autocommit; --limit-conns in
      parallel), and "insert, then update" per step on one connection;
  (b) for each 3-step workflow (`pass`, an HTTP POST per step, an INSERT per step with `sql/execute`) and each
      --daemons count: runs/s of --runs runs created while the daemons are paused (SIGSTOP), then driven by them
      (`a44 automation serve` subprocesses, SIGCONT .. last finished_at); CPU per run of the daemons and of
      PostgreSQL (/proc); commits per run in the control database and per `sql/execute` step in the application
      database (pg_stat_database.xact_commit deltas read from the `postgres` database, so the reader's own
      commits are never counted, once two reads agree: bench/runtime_commits.py);
  (c) for `pass` and HTTP, one run at a time on a fresh daemon counting its round trips (bench/runtime_daemon.py):
      the first 20 runs after it said it serves (warm-up), then --latency-runs, idle in between: client-observed
      p50/p99 from `create_run` to seeing the terminal state via LISTEN, and recorded finished_at - created_at;
  (d) DBOS (bench/runtime_dbos.py, its system database a database of its own on the same server) in its best
      mode per workflow: threads with `start_workflow` for `pass` and SQL (a datasource transaction per step: one
      transaction per step, as a44's `sql/execute`), async with 16 or 64 runs in flight for HTTP (the better
      kept), and every run started at once with no bound printed beside;
  (e) Restate (bench/runtime_restate.py: the npm server, default durability, the Python SDK under hypercorn), the
      same three workflows driven the same way: invocations queued while the service is paused, then drained;
      one run at a time through the ingress;
  (f) the rows and WAL bytes a `pass` fan-out writes per partition (--fanout-items, bench/bench_fanout.py).
A peer that is not installed is skipped with "peer not installed: run `bash bench/install_peers.sh`".
Then once: the RSS of an idle daemon and with --parked runs parked in a 1-hour `sleep` and after wake cycles, and
round trips per run counted in-process (bench/runtime_roundtrips.py).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import json
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

from proc_cpu import machine_busy_s, pg_cpu_s, pid_cpu_s  # noqa: E402
from runtime_commits import load_average  # noqa: E402
from runtime_commits import settled_commits as _settled  # noqa: E402
from runtime_far_side import FarSide  # noqa: E402
from runtime_limits import insert_then_update, raw_http, raw_inserts  # noqa: E402
from runtime_profile import Profiler  # noqa: E402

from anthares44.automation.runtime.postgres.embedded import EmbeddedServer, free_port  # noqa: E402
from anthares44.automation.runtime.postgres.projects import provision  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402

A44 = str(Path(sys.executable).parent / "a44")
PROJECT = "pj_default"
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
  - { id: s1, uses: sql/execute, timeout: 5s, query: "insert into bench_effects (n) values ($1)", params: [1] }
  - { id: s2, uses: sql/execute, timeout: 5s, query: "insert into bench_effects (n) values ($1)", params: [2] }
  - { id: s3, uses: sql/execute, timeout: 5s, query: "insert into bench_effects (n) values ($1)", params: [3] }
"""
HTTP_WF = """
name: bench-http
version: 1
steps:
  - { id: s1, uses: http, timeout: 5s, method: POST, url: "http://127.0.0.1:PORT/step/s1", json: { n: 1 } }
  - { id: s2, uses: http, timeout: 5s, method: POST, url: "http://127.0.0.1:PORT/step/s2", json: { n: 2 } }
  - { id: s3, uses: http, timeout: 5s, method: POST, url: "http://127.0.0.1:PORT/step/s3", json: { n: 3 } }
"""
TERMINAL = ("succeeded", "failed", "compensation_failed", "cancelled")
WORKFLOWS = {"pass": "wf_bench_pass", "http": "wf_bench_http", "sql": "wf_bench_sql"}   # the three


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


# --- the daemon subprocess --------------------------------------------------------------------------------------
class DaemonProc:
    """One daemon subprocess; `count`: bench/runtime_daemon.py counting its round trips once it serves
    (`round_trips()` after `stop()`)."""

    def __init__(self, url: str, home: Path, concurrency: int, extra: list[str] | None = None, count: bool = False):
        self.log = home / f"daemon-{time.monotonic_ns()}.log"
        env = {**os.environ, "A44_HOME": str(home), "A44_DATABASE_URL": url, "A44_APP_DATABASE_URL": app_url_of(url)}
        cmd = [A44, "automation", "serve", "--database-url", url, "--concurrency", str(concurrency)]
        if DAEMON_CMD[0] == "module" or count:
            cmd = [sys.executable, str(ROOT / "bench" / "runtime_daemon.py"), url, str(concurrency)]
        if count:
            env["A44_BENCH_COUNT"] = "1"
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

    def round_trips(self) -> dict:
        """What the daemon counted while serving (printed at exit), {} if it did not count."""
        for line in self.log.read_text().splitlines():
            if line.startswith("COUNTS "):
                return ast.literal_eval(line[len("COUNTS "):])
        return {}

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)


POSTMASTER = [0]
FAR_PID = [0]          # the far side's process (its CPU is the HTTP workflow's third party)
PROFILE: dict = {}     # --profile DIR: {'dir': Path}; each throughput daemon is sampled by py-spy


SETTLE_S: list[float] = []      # how long each settled read took (printed: it used to be 20 s every time)


async def settled_commits(url: str, datname: str | None = None) -> int:
    """xact_commit of the URL's database (or `datname`) once settled, read from the `postgres` database so the
    reader's own commits are never in it (bench/runtime_commits.py)."""
    value, took = await _settled(url, datname)
    SETTLE_S.append(took)
    return value


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
async def latency(url: str, store: Store, n: int, workflow: str = "wf_bench_pass") -> tuple[list[float], list[float]]:
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
        run_id = (await store.create_run(PROJECT, workflow, {"i": i}, key)).run_id
        waiting[run_id] = ev
        while True:
            row = await check.fetchrow("select state, finished_at - created_at as d from automation.runs "
                                       "where run_id = $1", run_id)
            if row["state"] in TERMINAL:
                break
            ev.clear()
            try:
                await asyncio.wait_for(ev.wait(), 2.0)
            except TimeoutError:
                pass
        observed.append((time.perf_counter() - t0) * 1000)
        recorded.append(row["d"].total_seconds() * 1000)
        del waiting[run_id]
        await asyncio.sleep(0.01)       # idle between runs
    await listen.close()
    await check.close()
    return observed, recorded


# --- (b) throughput ---------------------------------------------------------------------------------------------
FIRST = 20      # the first runs after a daemon announced readiness, apart (warm-up, issue 16)


async def one_at_a_time(url: str, home: Path, n: int, concurrency: int, workflow: str = "wf_bench_pass") -> dict:
    """(c) on a fresh daemon that counts its round trips: the first FIRST runs right after it said it serves
    (p99: warm-up), then n one at a time, idle in between."""
    await truncate(url)
    store = await Store.connect(url, min_size=2, max_size=8, results_dir=home / "results")
    d = DaemonProc(url, home, concurrency, count=True)
    try:
        first, _ = await latency(url, store, FIRST, workflow)
        await asyncio.sleep(0.5)
        obs, rec = await latency(url, store, n, workflow)
    finally:
        d.stop()
        await store.close()
    counts = d.round_trips()
    runs = FIRST + n
    return dict(lat_p50=pct(obs, 50), lat_p99=pct(obs, 99), lat_rec_p50=pct(rec, 50), lat_rec_p99=pct(rec, 99),
                first_p99=pct(first, 99), first_max=max(first),
                rt_per_run=counts.get("round_trips", float("nan")) / runs,
                rt_detail={k: round(v / runs, 2) for k, v in sorted(counts.items())})


async def throughput(url: str, home: Path, n: int, concurrency: int, workflow: str = "wf_bench_pass",
                     daemons: int = 1) -> dict:
    """(b) n runs created while `daemons` daemons are paused (SIGSTOP), then driven by them."""
    await truncate(url)
    out: dict = {}
    store = await Store.connect(url, min_size=2, max_size=8, results_dir=home / "results")
    ds = [DaemonProc(url, home, concurrency) for _ in range(daemons)]
    try:
        for d in ds:
            d.pause()
        t_create = time.perf_counter()
        await create_runs(store, workflow, n, f"tp-{time.monotonic_ns()}")
        out["create_s"] = n / (time.perf_counter() - t_create)
        await store.close()
        x0 = await settled_commits(url)
        app0 = await settled_commits(url, f"a44_app_{PROJECT}")
        poll = await asyncpg.connect(url)
        polls = 0
        spies = [Profiler(d.proc.pid, PROFILE["dir"] / f"{workflow}-x{daemons}-{i}.txt")
                 for i, d in enumerate(ds)] if PROFILE else []
        cpu0, pg0 = sum(d.cpu_s() for d in ds), pg_cpu_s(POSTMASTER[0])
        far0, busy0 = pid_cpu_s(FAR_PID[0]), machine_busy_s()
        t0 = time.time()
        for d in ds:
            d.resume()
        rss_peak = 0.0
        while True:
            await asyncio.sleep(0.05)
            rss_peak = max(rss_peak, ds[0].status("VmRSS"))
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
        out["daemon_cpu_ms_per_run"] = (sum(d.cpu_s() for d in ds) - cpu0) * 1000 / n
        out["pg_cpu_ms_per_run"] = (pg_cpu_s(POSTMASTER[0]) - pg0) * 1000 / n
        out["far_cpu_ms_per_run"] = (pid_cpu_s(FAR_PID[0]) - far0) * 1000 / n
        out["busy_cores"] = (machine_busy_s() - busy0) / (time.time() - t0)    # every process, this window
        out["profile"] = [spy.stop() for spy in spies]
        out["hwm_mb"] = ds[0].status("VmHWM")
        out["rss_peak_mb"] = rss_peak
        for d in ds:
            d.stop()
        x1 = await settled_commits(url)
        app1 = await settled_commits(url, f"a44_app_{PROJECT}")
        elapsed = float(last) - t0
        out.update(runs_s=n / elapsed, steps_s=3 * n / elapsed, elapsed_s=elapsed, failed=bad,
                   commits_per_run=(x1 - x0 - polls) / n, app_commits_per_step=(app1 - app0) / (3 * n))
    finally:
        for d in ds:
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
    app = await asyncpg.connect(app_url_of(url, PROJECT))      # where the sql workflow's INSERTs land
    await app.execute("create table if not exists bench_effects (id bigserial primary key, n integer not null)")
    await app.close()


def app_url_of(url: str, project: str = "{project}") -> str:
    """The application databases (where the sql workflow's statements run, one per project) beside the bench's
    control store: the `{project}` template A44_APP_DATABASE_URL takes, or one project's URL."""
    return url.replace("postgres@", f"a44_app_{project}@", 1).rsplit("/", 1)[0] + f"/a44_app_{project}"


def start_server(root: Path, durable: bool) -> tuple[EmbeddedServer, str]:
    server = EmbeddedServer(root, durable=durable)
    server.initdb()
    port = free_port()
    POSTMASTER[0] = server.start(port).pid
    admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    async def mk():
        c = await asyncpg.connect(admin)
        await c.execute("create database a44")
        # as the embedded server's: no project role may connect to the control database
        await c.execute("revoke connect, temporary on database a44 from public")
        await c.execute("create database dbos_bench")     # DBOS's system database, when it is compared
        settings = {r["name"]: r["setting"] for r in await c.fetch(
            "select name, setting from pg_settings where name in ('fsync', 'synchronous_commit', "
            "'full_page_writes', 'server_version', 'shared_buffers', 'wal_sync_method')")}
        await c.close()
        return settings

    settings = asyncio.run(mk())
    name = f"a44_app_{PROJECT}"     # the project's role and database, as a44 makes them on the embedded server
    asyncio.run(provision(admin, name, name, "bench"))
    print(f"# embedded PostgreSQL {settings.get('server_version')} in {root}: durable={durable} "
          f"fsync={settings.get('fsync')} synchronous_commit={settings.get('synchronous_commit')} "
          f"full_page_writes={settings.get('full_page_writes')} wal_sync_method={settings.get('wal_sync_method')}")
    return server, f"postgresql://postgres@127.0.0.1:{port}/a44"


@contextlib.contextmanager
def site(prefix: str, *settings: str):
    """A bench of its own (bench_runtime_ab.py, bench_one_run.py): a temp dir, a durable embedded server with this
    bench's three workflows published (`settings`: `alter database a44 set ...` before any daemon connects), the
    far side, the module daemon. Yields (home, server, url); removes everything afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    home = root / "home"
    home.mkdir()
    server, url = start_server(root / "pg", True)
    far = FarSide()
    FAR_PID[0] = far.proc.pid
    DAEMON_CMD[0] = "module"           # bench/runtime_daemon.py: it reads the A/B variants
    try:
        asyncio.run(prepare(url, home, {"bench-pass.yaml": PASS_WF, "bench-sql.yaml": SQL_WF,
                                        "bench-http.yaml": HTTP_WF.replace("PORT", str(far.port))}))
        if settings:
            asyncio.run(_alter_database(url, settings))
        yield home, server, url
    finally:
        far.stop()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _alter_database(url: str, settings: tuple[str, ...]) -> None:
    c = await asyncpg.connect(url)
    try:
        for setting in settings:
            await c.execute(f"alter database a44 set {setting}")
    finally:
        await c.close()


PEER_PY = ROOT / "bench" / ".peers" / "venv" / "bin" / "python"
DBOS_MODES = {"pass": ["threads"], "sql": ["threads"], "http": ["async:16", "async:64"]}   # best mode, candidates
UNBOUNDED = "async:0"      # every run started at once, no bound: the old driver, printed beside


def dbos_missing() -> str | None:
    if not PEER_PY.exists() or subprocess.run([str(PEER_PY), "-c", "import dbos"], capture_output=True).returncode:
        return "DBOS peer not installed: run `bash bench/install_peers.sh`"
    return None


def dbos_side(url: str, far: FarSide, workflow: str, mode: str, runs: int, latency_runs: int) -> dict | None:
    """The same workflow on DBOS (bench/runtime_dbos.py under the peers' Python, its own system database) driven
    in `mode`; None if it failed (said why)."""
    sys_url = url.rsplit("/", 1)[0] + "/dbos_bench"
    x0 = asyncio.run(settled_commits(sys_url))
    got = subprocess.run([str(PEER_PY), str(ROOT / "bench" / "runtime_dbos.py"), sys_url, app_url_of(url, PROJECT),
                          str(far.port), workflow, mode, str(runs), str(latency_runs), str(POSTMASTER[0])],
                         capture_output=True, text=True, timeout=900)
    if got.returncode:
        print(f"# DBOS {workflow} {mode} failed: {got.stderr[-1500:]}", flush=True)
        return None
    out = json.loads(got.stdout.strip().splitlines()[-1])
    # the whole process: launch, its warm-up run(s), the RUNS and the latency runs
    out["commits_per_run"] = (asyncio.run(settled_commits(sys_url)) - x0) / (runs + latency_runs + 1)
    out["mode"] = mode
    return out


def dbos_best(url: str, far: FarSide, wf: str, args, rep: dict) -> None:
    """DBOS's candidate modes for `wf` (the first one also one run at a time), the best runs/s kept as
    rep['dbos_<wf>'], and the unbounded mode beside it as rep['dbos_<wf>_unbounded']."""
    best = None
    for k, mode in enumerate(DBOS_MODES[wf] + [UNBOUNDED]):
        lat = args.latency_runs if (k == 0 and wf in args.latency_workflows) else 0
        la = load_average()
        dq = dbos_side(url, far, wf, mode, args.runs, lat)
        if dq is None:
            continue
        print(f"    DBOS {wf} {mode}: runs/s {dq['runs_s']:,.0f} | CPU ms/run process {dq['cpu_ms_per_run']:.2f} "
              f"PostgreSQL {dq['pg_cpu_ms_per_run']:.2f} | commits/run {dq['commits_per_run']:.2f}"
              + (f" | one at a time p50 {dq['lat_p50']:.1f} p99 {dq['lat_p99']:.1f} ms" if "lat_p50" in dq else "")
              + f" | load {la} -> {load_average()}", flush=True)
        if mode == UNBOUNDED:
            rep[f"dbos_{wf}_unbounded"] = dq
            continue
        if best is None:
            best = dq
        elif dq["runs_s"] > best["runs_s"]:
            best = {**dq, **{k2: best[k2] for k2 in ("lat_p50", "lat_p99") if k2 in best}}
    if best is not None:
        rep[f"dbos_{wf}"] = best


def restate_side(peer, wf: str, args, rep: dict) -> None:
    la = load_average()
    try:
        tp = asyncio.run(peer.throughput(wf, args.runs))
        lat = asyncio.run(peer.latency(wf, args.latency_runs)) if (
            wf in args.latency_workflows and args.latency_runs) else {}
    except Exception as e:      # a peer that fails says so; the bench goes on
        print(f"# Restate {wf} failed: {e!r}", flush=True)
        return
    rep[f"restate_{wf}"] = {**tp, **lat}
    print(f"    Restate {wf}: runs/s {tp['runs_s']:,.0f} ({tp['elapsed_s']:.2f}s; queued at {tp['create_s']:,.0f}/s) "
          f"| CPU ms/run server {tp['server_cpu_ms_per_run']:.2f} service {tp['sdk_cpu_ms_per_run']:.2f} PostgreSQL "
          f"{tp['pg_cpu_ms_per_run']:.2f}" + (f" | one at a time p50 {lat['lat_p50']:.1f} p99 {lat['lat_p99']:.1f} ms"
                                              if lat else "") + f" | load {la} -> {load_average()}", flush=True)


def start_restate(root: Path, far: FarSide, url: str):
    """The Restate peer (bench/runtime_restate.py), or None with the reason printed."""
    import runtime_restate

    why = runtime_restate.missing()
    if why:
        print(f"# {why}", flush=True)
        return None
    try:
        peer = runtime_restate.RestatePeer(root, far.port, app_url_of(url, PROJECT), POSTMASTER[0])
    except Exception as e:
        print(f"# Restate peer did not start: {e!r}", flush=True)
        return None
    print(f"# Restate {runtime_restate.version()}, default durability, service under hypercorn", flush=True)
    return peer


async def _connections(url: str) -> dict:
    c = await asyncpg.connect(url)
    try:
        rows = await c.fetch("select coalesce(datname, '-') || '/' || coalesce(usename, '-') as k, count(*) as n "
                             "from pg_stat_activity where backend_type = 'client backend' group by 1 order by 1")
        return {r["k"]: r["n"] for r in rows}
    finally:
        await c.close()


def fanout_rows(url: str, home: Path, items: int) -> dict:
    """Rows written per partition of a `pass` fan-out (bench/bench_fanout.py's measure: pg_stat_database tuples
    inserted + updated + deleted per item, WAL bytes per item) on one fresh daemon."""
    import bench_fanout

    return asyncio.run(bench_fanout.measure(url, home, "wf_fan_pass", items, 600))


def bench(durable: bool, args) -> dict:
    root = Path(tempfile.mkdtemp(prefix="a44-bench-"))
    home = root / "home"
    home.mkdir()
    server, url = start_server(root / "pg", durable)
    far = FarSide()
    FAR_PID[0] = far.proc.pid
    res: dict = {"durable": durable, "reps": []}
    peer = None
    try:
        import bench_fanout

        asyncio.run(prepare(url, home, {"bench-pass.yaml": PASS_WF, "bench-sleep.yaml": SLEEP_WF,
                                        "bench-sql.yaml": SQL_WF, "fan-pass.yaml": bench_fanout.PASS_WF,
                                        "bench-http.yaml": HTTP_WF.replace("PORT", str(far.port))}))
        if args.dbos and (why := dbos_missing()):
            print(f"# {why}", flush=True)
            args.dbos = False
        if args.restate:
            peer = start_restate(root, far, url)
        for r in range(args.repeat):       # every figure once per repeat: interleaved, medians over repeats
            print(f"  rep {r + 1}: connections open {asyncio.run(_connections(url))}", flush=True)
            rep = {"limit1": asyncio.run(raw_inserts(url, 1, args.limit_seconds)),
                   "limitn": asyncio.run(raw_inserts(url, args.limit_conns, args.limit_seconds)),
                   "insert_update": asyncio.run(insert_then_update(url, args.limit_seconds))}
            if "http" in args.workflows:
                rep["raw_http"] = asyncio.run(raw_http(far.port, far.proc.pid, args.limit_seconds, args.concurrency))
            print(f"  rep {r + 1}: raw INSERT/s 1 conn {rep['limit1']:,.0f}, {args.limit_conns} conns "
                  f"{rep['limitn']:,.0f}; insert+update steps/s {rep['insert_update']:,.0f}", flush=True)
            if "raw_http" in rep:
                h = rep["raw_http"]
                print(f"  rep {r + 1}: bare aiohttp POSTs to the far side, {args.concurrency} at once: "
                      f"{h['requests_s']:,.0f}/s, CPU ms per request client {h['client_cpu_ms']:.3f} far side "
                      f"{h['far_cpu_ms']:.3f}", flush=True)
            for wf in args.workflows:
                for d in args.daemons:
                    la = load_average()
                    tp = asyncio.run(throughput(url, home, args.runs, args.concurrency, WORKFLOWS[wf], d))
                    rep[f"tp_{wf}_{d}"] = tp
                    print(f"    a44 {wf} x{d} daemon(s): runs/s {tp['runs_s']:,.0f} ({tp['elapsed_s']:.2f}s, not "
                          f"succeeded {tp['failed']}) | commits/run {tp['commits_per_run']:.2f}"
                          + (f", per step in the app DB {tp['app_commits_per_step']:.2f}" if wf == "sql" else "")
                          + f" | CPU ms/run daemon "
                          f"{tp['daemon_cpu_ms_per_run']:.2f} PostgreSQL {tp['pg_cpu_ms_per_run']:.2f} far side "
                          f"{tp['far_cpu_ms_per_run']:.2f} | machine busy {tp['busy_cores']:.2f} cores | HWM "
                          f"{tp['hwm_mb']:.0f} MB | commit counts settled in {max(SETTLE_S[-4:]):.1f}s at most | load {la} -> "
                          f"{load_average()}", flush=True)
                    for prof in tp["profile"]:
                        print(prof, flush=True)
                if wf in args.latency_workflows and args.latency_runs:
                    la = load_average()
                    lat = asyncio.run(one_at_a_time(url, home, args.latency_runs, args.concurrency, WORKFLOWS[wf]))
                    rep[f"lat_{wf}"] = lat
                    print(f"    a44 {wf} one at a time: p50 {lat['lat_p50']:.1f} p99 {lat['lat_p99']:.1f} ms "
                          f"(recorded {lat['lat_rec_p50']:.1f} / {lat['lat_rec_p99']:.1f}); first {FIRST} after "
                          f"readiness p99 {lat['first_p99']:.1f} max {lat['first_max']:.1f} ms; daemon round trips "
                          f"per run {lat['rt_per_run']:.2f} {lat['rt_detail']} | load {la} -> {load_average()}",
                          flush=True)
                if args.dbos:
                    dbos_best(url, far, wf, args, rep)
                if peer is not None:
                    restate_side(peer, wf, args, rep)
            if args.fanout_items:
                la = load_average()
                rep["fan_pass"] = fanout_rows(url, home, args.fanout_items)
                fp = rep["fan_pass"]
                print(f"    a44 fan-out of {args.fanout_items:,} `pass` items: {fp['rows_item']:.2f} rows and "
                      f"{fp['wal_item']:,.0f} WAL bytes per partition, {fp['items_s']:,.0f} items/s | load {la} -> "
                      f"{load_average()}", flush=True)
            res["reps"].append(rep)
        if args.parked:
            la = load_average()
            res["parked"] = asyncio.run(parked(url, home, args.parked, args.concurrency, args.cycles))
            p = res["parked"]
            print(f"  parked {args.parked}: RSS before {p['rss_before']:.1f} MB, parked {p['rss_parked']:.1f} MB, "
                  f"after cycles {', '.join(f'{x:.1f}' for x in p['rss_cycles'])} MB (HWM {p['hwm']:.1f}); "
                  f"created+parked in {p['park_s']:.1f}s | load {la} -> {load_average()}", flush=True)
        if args.round_trips:
            from runtime_roundtrips import count_round_trips

            res["rt"] = asyncio.run(count_round_trips(url, home, args.round_trips))
            print(f"  in-process counts over {args.round_trips} runs: {res['rt']}", flush=True)
            res["rt_effect"] = asyncio.run(count_round_trips(url, home, args.round_trips, effect=True))
            print(f"  in-process, steps with an effect (pass not inlined), {args.round_trips} runs: "
                  f"{res['rt_effect']}", flush=True)
    finally:
        if peer is not None:
            peer.stop()
        far.stop()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2000, help="runs per throughput measurement")
    ap.add_argument("--latency-runs", type=int, default=200, help="runs one at a time (after the first 20)")
    ap.add_argument("--parked", type=int, default=10_000)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64, help="each daemon's --concurrency (runs in flight)")
    ap.add_argument("--daemons", default="1,2",
                    help="daemons on the one PostgreSQL for the throughput figures: N or a list, e.g. 1,2,4")
    ap.add_argument("--workflows", default="pass,http,sql", help="of pass, http, sql")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit-seconds", type=float, default=2.0)
    ap.add_argument("--limit-conns", type=int, default=16)
    ap.add_argument("--round-trips", type=int, default=200, help="runs for the in-process round-trip count (0: skip)")
    ap.add_argument("--no-dbos", dest="dbos", action="store_false", help="skip DBOS even if it is installed")
    ap.add_argument("--no-restate", dest="restate", action="store_false",
                    help="skip Restate even if it is installed (bash bench/install_peers.sh)")
    ap.add_argument("--fanout-items", type=int, default=2000,
                    help="items of the `pass` fan-out whose rows per partition are counted (0: skip)")
    ap.add_argument("--also-non-durable", action="store_true", help="repeat everything with durable=False")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", metavar="DIR", help="sample each throughput daemon with py-spy (pip install py-spy) "
                    "into DIR/<workflow>-x<daemons>-<i>.txt and print where its CPU goes")
    ap.add_argument("--daemon", choices=("a44", "module"), default="a44",
                    help="a44: `a44 automation serve`; module: bench/runtime_daemon.py (the same Daemon, used "
                         "automatically when the a44 entry point does not start)")
    args = ap.parse_args()
    args.daemons = [int(x) for x in str(args.daemons).split(",")]
    args.workflows = [w for w in args.workflows.split(",") if w]
    args.latency_workflows = ("pass", "http")
    DAEMON_CMD[0] = args.daemon
    if args.profile:
        PROFILE["dir"] = Path(args.profile).resolve()
        PROFILE["dir"].mkdir(parents=True, exist_ok=True)
    if args.daemon == "a44" and subprocess.run([A44, "automation", "serve", "--help"], capture_output=True).returncode:
        print("# `a44 automation serve --help` fails in this tree; using bench/runtime_daemon.py (same Daemon)")
        DAEMON_CMD[0] = "module"
    if args.quick:
        args.runs, args.latency_runs, args.parked, args.limit_seconds = 500, 100, 1000, 1.0
        args.round_trips, args.fanout_items = 0, 1000
    results = [bench(True, args)]
    if args.also_non_durable:
        results.append(bench(False, args))
    from runtime_goals import table
    from runtime_table import summary

    for res in results:
        summary(res, args, daemon_cmd=DAEMON_CMD[0])
        table(res, args)


if __name__ == "__main__":
    main()
