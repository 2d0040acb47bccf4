"""Webhook endpoint latency under load (SPEC §9, issue 5: p99 < 200 ms at 500 requests/s while workflows run), on
loopback. Report, not a test:

    .venv/bin/python bench/bench_webhooks.py [--verbs serve ingest] [--rate 500] [--seconds 10] [--repeat 3]
        [--ramp 250 500 750 1000 1250 1500] [--durable] [--database-url URL] [--no-limits] [--json FILE]

Starts an embedded PostgreSQL in a temp dir (unless --database-url; `--durable` keeps fsync and synchronous_commit
on, as in production, otherwise the test cluster's fsync=off is used), publishes a webhook-triggered workflow
(two `pass` steps) and, for each verb, runs `a44 automation <verb> --http-port P` as a subprocess:

* `serve`: workers + HTTP in one daemon (the issue's condition: the created runs execute during the measurement);
* `ingest`: the HTTP ingestion plane alone.

The load generator (bench/webhook_loadgen.py) is open loop with pre-signed requests: latency is measured from each
request's due time (no coordinated omission). For each verb: `--repeat` runs at `--rate` (the median run by p99 is
reported, with all of them), then a ramp; "max sustained" = the highest ramp rate whose p99 < 200 ms with every
answer 202 and achieved >= 95 % of the target, below the first step that fails (printed with "+" when even the
top of the ramp passed: the limit is higher). The same run first prints the machine's physical limits: raw
single-row INSERTs/s from asyncpg on the same PostgreSQL, and a trivial aiohttp handler's req/s (wrk, closed loop,
when installed; and the open-loop generator at --rate).
CPU: `cpu_server_pct` (the server process, % of one core), `cpu_loadgen_pct`, `cpu_machine_pct` (both cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from webhook_loadgen import presign, run_open_loop  # noqa: E402

WORKFLOW = ("name: bench-hook\nversion: 1\nsteps:\n  - id: a\n    uses: pass\n    timeout: 5s\n"
            "  - id: b\n    uses: pass\n    timeout: 5s\n")
TRIGGER = "- id: trg_bench\n  type: webhook\n  workflow: wf_bench_hook\n"
P = "pj_bench"
HOST = "127.0.0.1"
TRIVIAL = textwrap.dedent("""
    import sys
    from aiohttp import web
    async def h(request):
        await request.read()
        return web.json_response({"ok": True}, status=202)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", h)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _cpu_of(pid: int) -> float:
    """utime+stime of a process and its waited-for children, in seconds."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            kids = []
        todo.extend(int(k) for k in kids)
    return out


def _machine_busy() -> tuple[float, float]:
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


class CpuMeter:
    def __init__(self, pid: int | None):
        self.pid = pid

    def __enter__(self):
        self.pids = _tree(self.pid) if self.pid else []
        self.s0 = sum(_cpu_of(p) for p in self.pids)
        self.l0, self.m0, self.t0 = time.process_time(), _machine_busy(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        dt = time.perf_counter() - self.t0
        busy = _machine_busy()
        self.result = {
            "cpu_server_pct": round(100 * (sum(_cpu_of(p) for p in self.pids) - self.s0) / dt) if self.pid else None,
            "cpu_loadgen_pct": round(100 * (time.process_time() - self.l0) / dt),
            "cpu_machine_pct": round(100 * (busy[0] - self.m0[0]) / max(1, busy[1] - self.m0[1]))}


async def wait_http(port: int, proc: subprocess.Popen | None = None) -> None:
    for _ in range(300):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            async with aiohttp.ClientSession() as s, s.get(f"http://{HOST}:{port}/healthz") as r:
                if r.status < 500:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError("the server did not answer /healthz")


async def fire(port: int, secret: str, rate: float, seconds: float, tag: str, pid: int | None) -> dict:
    reqs = presign(HOST, port, f"/v1/{P}/trg_bench", secret, int(rate * seconds), tag)
    with CpuMeter(pid) as cpu:
        res = await run_open_loop(HOST, port, reqs, rate)
    res.update(cpu.result)
    return res


def _ok(r: dict) -> bool:
    return (r["p99_ms"] is not None and r["p99_ms"] < 200 and set(r["statuses"]) <= {"202"} and not r["errors"]
            and r["achieved_rps"] >= 0.95 * r["target_rps"])


# --- physical limits ---------------------------------------------------------------------------------------------
async def raw_inserts(url: str, seconds: float = 3, conns: int = 8) -> dict:
    import asyncpg

    c = await asyncpg.connect(url)
    await c.execute("create table if not exists public.bench_raw (id bigserial primary key, k text, at timestamptz)")
    await c.close()
    pool = await asyncpg.create_pool(url, min_size=conns, max_size=conns)
    n = [0]
    stop = time.perf_counter() + seconds

    async def worker():
        async with pool.acquire() as conn:
            while time.perf_counter() < stop:
                await conn.execute("insert into public.bench_raw (k, at) values ($1, now())", "k")
                n[0] += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conns)))
    dt = time.perf_counter() - t0
    await pool.close()
    return {"raw_single_row_inserts_per_s": round(n[0] / dt), "connections": conns, "autocommit": True}


async def trivial_http(rate: float, seconds: float) -> dict:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", TRIVIAL, str(port)])
    try:
        await wait_http(port, proc)
        out: dict = {}
        if shutil.which("wrk"):
            lua = Path(tempfile.mkdtemp()) / "post.lua"
            lua.write_text('wrk.method = "POST"\nwrk.body = \'{"i": 1}\'\n'
                           'wrk.headers["Content-Type"] = "application/json"\n')
            w = await asyncio.to_thread(subprocess.run, ["wrk", "-t1", "-c32", "-d4s", "-s", str(lua),
                                                          f"http://{HOST}:{port}/x"], capture_output=True, text=True)
            for line in w.stdout.splitlines():
                if line.startswith("Requests/sec:"):
                    out["trivial_aiohttp_max_rps_wrk_closed_loop"] = float(line.split()[1])
        reqs = [f"POST /x HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n"
                '{"i": 1}'.encode() for _ in range(int(rate * seconds))]
        r = await run_open_loop(HOST, port, reqs, rate)
        out["trivial_aiohttp_open_loop"] = {k: r[k] for k in ("target_rps", "achieved_rps", "p50_ms", "p99_ms",
                                                              "max_ms")}
        return out
    finally:
        proc.terminate()
        proc.wait(10)


# --- main --------------------------------------------------------------------------------------------------------
async def main(args) -> None:
    from anthares44.automation.app.publishing import publish
    from anthares44.automation.runtime.ingestion.triggers import current_secret
    from anthares44.automation.runtime.store.core import Store

    pg = None
    url = args.database_url
    tmp = tempfile.TemporaryDirectory(prefix="a44-bench-")
    if url is None:
        from anthares44.automation.runtime.postgres.embedded import EmbeddedServer
        os.chmod(tmp.name, 0o755)   # the server may run as another user than root
        pg = EmbeddedServer(Path(tmp.name) / "pg", durable=args.durable)
        await asyncio.to_thread(pg.initdb)
        pgport = free_port()
        await asyncio.to_thread(pg.start, pgport)
        url = f"postgresql://postgres@127.0.0.1:{pgport}/postgres"
    report: dict = {"machine": {"cpus": os.cpu_count(), "durable_pg": args.durable or args.database_url is not None},
                    "verbs": {}}
    root = Path(tmp.name) / "proj"
    (root / "w").mkdir(parents=True)
    (root / "w" / "bench.yaml").write_text(WORKFLOW)
    (root / "t.yaml").write_text(TRIGGER)
    store = await Store.connect(url, results_dir=Path(tmp.name) / "results")
    try:
        await store.migrate()
        pub = await publish(store, P, [str(root)])
        assert pub.ok, [d.to_dict() for d in pub.diagnostics]
        secret = (await current_secret(store, P, "trg_bench"))["secret"]
        if not args.no_limits:
            limits = await raw_inserts(url)
            limits.update(await trivial_http(args.rate, 4))
            report["limits"] = limits
            print(json.dumps({"limits": limits}), flush=True)
        for verb in args.verbs:
            port = free_port()
            env = dict(os.environ, A44_DATABASE_URL=url, A44_HOME=str(Path(tmp.name) / "home"))
            cmd = [str(Path(sys.executable).parent / "a44"), "automation", verb, "--http-port", str(port)]
            if verb == "serve":
                cmd += ["--concurrency", str(args.concurrency)]
            cmd += args.server_arg
            proc = subprocess.Popen(cmd, env=env)
            try:
                await wait_http(port, proc)
                await fire(port, secret, 100, 2, f"warm-{verb}-{time.time_ns()}", None)
                async with store.connection("bench") as conn:
                    before = await conn.fetchval("select count(*) from automation.runs where state = 'succeeded'")
                t0 = time.perf_counter()
                runs = []
                for i in range(args.repeat):
                    r = await fire(port, secret, args.rate, args.seconds, f"{verb}-{i}-{time.time_ns()}", proc.pid)
                    print(json.dumps({"verb": verb, "run": i + 1, **r}), flush=True)
                    runs.append(r)
                async with store.connection("bench") as conn:
                    after = await conn.fetchval("select count(*) from automation.runs where state = 'succeeded'")
                med = sorted(runs, key=lambda r: r["p99_ms"] if r["p99_ms"] is not None else 1e9)[len(runs) // 2]
                ramp, best = [], None
                for rate in args.ramp:
                    r = await fire(port, secret, rate, max(3, args.seconds / 2), f"{verb}-ramp{rate}-{time.time_ns()}",
                                   proc.pid)
                    print(json.dumps({"verb": verb, "ramp": rate, **r}), flush=True)
                    ramp.append(r)
                    if not _ok(r):
                        break            # max sustained = the last step before the first failing one
                    best = rate
                report["verbs"][verb] = {
                    "median_run": med, "runs": runs, "ramp": ramp, "ramp_top_reached": not ramp or _ok(ramp[-1]), "max_sustained_rps_p99_under_200ms": best,
                    "workflow_runs_succeeded_during_main_runs": after - before,
                    "workflow_runs_per_s_during_main_runs": round((after - before) / (time.perf_counter() - t0), 1)}
            finally:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        print("\n" + summary(report), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2))
    finally:
        await store.close()
        if pg is not None:
            await asyncio.to_thread(pg.stop)
        tmp.cleanup()


def summary(report: dict) -> str:
    lines = []
    lim = report.get("limits")
    if lim:
        t = lim.get("trivial_aiohttp_open_loop", {})
        lines.append(f"physical limits: raw single-row INSERT {lim['raw_single_row_inserts_per_s']}/s "
                     f"({lim['connections']} conns); trivial aiohttp handler "
                     f"{lim.get('trivial_aiohttp_max_rps_wrk_closed_loop', '?')} req/s max (wrk, closed loop), "
                     f"at {t.get('target_rps')}/s open loop p50 {t.get('p50_ms')} ms p99 {t.get('p99_ms')} ms")
    lines.append(f"{'verb':8} {'target':>7} {'achieved':>9} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} "
                 f"{'errors':>7} {'srvCPU%':>8} {'maxSust':>8}")
    for verb, v in report["verbs"].items():
        m = v["median_run"]
        bad = sum(m["errors"].values()) + sum(n for s, n in m["statuses"].items() if s != "202")
        best = str(v["max_sustained_rps_p99_under_200ms"]) + ("+" if v["ramp_top_reached"] else "")
        lines.append(f"{verb:8} {m['target_rps']:>7} {m['achieved_rps']:>9} {m['p50_ms']:>8} {m['p90_ms']:>8} "
                     f"{m['p99_ms']:>8} {m['max_ms']:>8} {bad:>7} {m['cpu_server_pct']:>8} {best:>8}")
        if verb == "serve":
            lines.append(f"         workflow runs succeeded during the {len(v['runs'])} main runs: "
                         f"{v['workflow_runs_succeeded_during_main_runs']} "
                         f"({v['workflow_runs_per_s_during_main_runs']}/s)")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--verbs", nargs="+", default=["serve", "ingest"], choices=["serve", "ingest"])
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ramp", type=int, nargs="*", default=[250, 500, 750, 1000, 1250, 1500, 2000, 2500])
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--durable", action="store_true", help="embedded PostgreSQL with fsync/synchronous_commit on")
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--no-limits", action="store_true", help="skip the raw INSERT / trivial handler measurements")
    ap.add_argument("--server-arg", action="append", default=[], help="extra argument for the server command")
    ap.add_argument("--json", default=None, help="also write the full report to FILE")
    asyncio.run(main(ap.parse_args()))
