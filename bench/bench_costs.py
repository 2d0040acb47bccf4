"""Interleaved A/B of issue 32's cost items: A and B are two checkouts (A: main's code, e.g. `git archive main | tar
-x -C /tmp/a`; B: this one), run as child processes against one throwaway embedded PostgreSQL, in alternating
blocks, medians reported.

  python bench/bench_costs.py sql --a /tmp/a [--b .] [--blocks 8] [--steps 300]
      commits (pg_stat_database.xact_commit), backend CPU and client CPU per `sql/execute` step in a project's
      application database (an effect-guarded INSERT, as the seed writes it)
  python bench/bench_costs.py rss --a /tmp/a [--b .] [--blocks 3]
      VmRSS of an idle `a44 automation serve` daemon, 3 s after it said it was ready
  python bench/bench_costs.py fanout --a /tmp/a [--b .] [--blocks 3] [--partitions 1000]
      rows inserted + updated (pg_stat_user_tables) per partition of a fan-out of `uses: pass`

The load average is printed with each figure: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(checkout: str, *args: str) -> dict:
    """Run this script's `--child` mode with `checkout` first on sys.path; its last stdout line is JSON."""
    env = dict(os.environ, PYTHONPATH=str(Path(checkout).resolve()))
    out = subprocess.run([sys.executable, str(HERE / "bench_costs.py"), "--child", *args], env=env,
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"child in {checkout} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------- sql/execute

async def _sql_child(admin: str, project_url: str, stats_url: str, steps: int) -> dict:
    import asyncpg

    from anthares44.automation.stdlib_connectors.protocol import StepContext
    from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry, validate_params
    from anthares44.automation.stdlib_connectors.sql_database import AppDatabase

    def backend_cpu(pids) -> float:
        from proc_cpu import pid_cpu_s
        return sum(pid_cpu_s(p) for p in pids)

    if os.environ.get("BENCH_NO_SWEEP"):     # B without the prepared-statement sweep: what the sweep costs
        from anthares44.automation.stdlib_connectors import sql_session as ss
        for name in ("_RESET", "_RESET_COMMIT", "_ROLLBACK_RESET"):
            text = getattr(ss, name)
            head, _, tail = text.partition("do $a44$")
            setattr(ss, name, head + tail.partition("$a44$;")[2])
    stats = await asyncpg.connect(stats_url)
    app = AppDatabase(project_url.replace("pj_default", "{project}"))
    reg = ConnectorRegistry()
    conn = reg.get("sql/execute")
    q = {"query": "insert into guard (run_id, step_id, amount) values ($1, $2, $3) "
                  "on conflict (run_id, step_id) do nothing"}

    async def one(i: int):
        ctx = StepContext(run_id=f"run_{i}_{time.time_ns()}", step_id="s", attempt=1, idempotency_key=f"k{i}",
                          project_id="pj_default", workflow_id="wf", deadline=time.monotonic() + 10,
                          services={"app_db": app})
        await conn.invoke(validate_params(conn, {**q, "params": [ctx.run_id, "s", "1.5"]}), ctx)

    await one(-1)           # the pool's connection made, the statement cached
    pids = [r["pid"] for r in await stats.fetch(
        "select pid from pg_stat_activity where application_name = 'a44-sql-execute'")]
    before = await stats.fetchval("select xact_commit from pg_stat_database where datname = current_database()")
    c0, b0 = time.process_time(), backend_cpu(pids)
    for i in range(steps):
        await one(i)
    cpu, bcpu = time.process_time() - c0, backend_cpu(pids) - b0
    await reg.aclose()
    await app.aclose()       # a backend flushes its counters when it exits
    await asyncio.sleep(0.3)
    await stats.execute("select pg_stat_clear_snapshot()")
    after = await stats.fetchval("select xact_commit from pg_stat_database where datname = current_database()")
    await stats.close()
    # the closing of the pool's connection and this session's own reads: measured as 0-step blocks (see `sql`)
    return {"commits": after - before, "client_us": cpu / max(steps, 1) * 1e6,
            "backend_us": bcpu / max(steps, 1) * 1e6}


def sql(args, admin: str) -> None:
    sys.path.insert(0, str(Path(args.b).resolve()))
    from anthares44.automation.testkit.databases import AppDatabases, with_database

    apps = AppDatabases(admin)
    url = apps.url("pj_default")
    stats = with_database(admin, apps.prefix + "pj_default")

    async def setup():
        import asyncpg
        c = await asyncpg.connect(url)
        await c.execute("create table guard (run_id text, step_id text, amount numeric, primary key (run_id, step_id))")
        await c.close()
    asyncio.run(setup())
    res: dict[str, list[dict]] = {"A": [], "B": []}
    base: dict[str, float] = {}
    for side, path in (("A", args.a), ("B", args.b)):          # what a block costs besides its steps
        base[side] = child(path, "sql", admin, url, stats, "0")["commits"]
    sides = [("A", args.a), ("B", args.b)] + ([("B-no-sweep", args.b)] if args.no_sweep else [])
    res.update({s: [] for s, _ in sides})
    base["B-no-sweep"] = base["B"]
    for block in range(args.blocks):
        for side, path in (sides if block % 2 == 0 else sides[::-1]):
            if side == "B-no-sweep":
                os.environ["BENCH_NO_SWEEP"] = "1"
            r = child(path, "sql", admin, url, stats, str(args.steps))
            os.environ.pop("BENCH_NO_SWEEP", None)
            r["commits"] = (r["commits"] - base[side]) / args.steps
            res[side].append(r)
    print(f"sql/execute, {args.steps} steps x {args.blocks} blocks, load average {os.getloadavg()[0]:.1f}")
    for side, _ in sides:
        rs = res[side]
        print(f"  {side}: commits/step {statistics.median(r['commits'] for r in rs):.2f}  "
              f"client CPU {statistics.median(r['client_us'] for r in rs):.0f} us/step  "
              f"backend CPU {statistics.median(r['backend_us'] for r in rs):.0f} us/step")


# ------------------------------------------------------------------------------------------------------ idle RSS

def _rss_child(url: str) -> dict:
    """Start `a44 automation serve` (this child's checkout), wait for its `serving` line, 3 s more, read VmRSS."""
    import signal
    import threading

    proc = subprocess.Popen([sys.executable, "-m", "anthares44.automation", "automation", "serve", "--database-url",
                             url], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            cwd=os.environ["PYTHONPATH"])        # `-m` puts the cwd first on sys.path
    ready = threading.Event()

    def watch():
        for line in proc.stderr:
            if " serving " in line:
                ready.set()
    threading.Thread(target=watch, daemon=True).start()
    try:
        if not ready.wait(120):
            raise SystemExit("serve never said `serving`")
        time.sleep(3)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        rss_kb = int(next(x for x in status.splitlines() if x.startswith("VmRSS")).split()[1])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    return {"rss_mb": rss_kb / 1024}


def rss(args, admin: str) -> None:
    import asyncpg

    async def mk():
        c = await asyncpg.connect(admin)
        await c.execute("create database rss")
        await c.close()
    asyncio.run(mk())
    url = admin.rsplit("/", 1)[0] + "/rss"
    child(args.b, "rss", url)       # migrates; both sides then start on an up-to-date schema
    res: dict[str, list[float]] = {"A": [], "B": []}
    for block in range(args.blocks):
        for side, path in ((("A", args.a), ("B", args.b)) if block % 2 == 0 else (("B", args.b), ("A", args.a))):
            res[side].append(child(path, "rss", url)["rss_mb"])
    print(f"idle `a44 automation serve` VmRSS, {args.blocks} starts each, load average {os.getloadavg()[0]:.1f}")
    for side in ("A", "B"):
        print(f"  {side}: median {statistics.median(res[side]):.1f} MB  (each: "
              f"{', '.join(f'{x:.1f}' for x in res[side])})")


# ------------------------------------------------------------------------------------------------ fan-out rows

FAN_WF = """
name: fan-pass-{tag}
version: 1
steps:
  - id: each
    uses: pass
    timeout: 10s
    output: {{id: "{{{{ item.id }}}}", n: "{{{{ item.n }}}}"}}
    partitions: {{foreach: "input.items", key: "item.id", concurrency: 64}}
"""


async def _fan_child(url: str, n: int, tag: str) -> dict:
    """One run of a `foreach` fan-out of `pass` over `n` items, driven in process by one Engine; rows inserted,
    updated and deleted per table (pg_stat_user_tables, read after the engine's connections closed)."""
    import random
    from datetime import timedelta

    import asyncpg

    from anthares44.automation.clock import SystemClock
    from anthares44.automation.compiler.ir import to_json
    from anthares44.automation.compiler.lint import compile_sources
    from anthares44.automation.compiler.source import load_text
    from anthares44.automation.runtime.engine import Engine
    from anthares44.automation.runtime.store.core import Store
    from anthares44.automation.stdlib_connectors.pass_ import PassConnector
    from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry

    res = compile_sources([load_text(FAN_WF.format(tag=tag), "w.yaml")], "lint", lower=True)
    (ir,) = res.irs.values()
    store = await Store.connect(url, clock=SystemClock())
    await store.migrate()
    await store.ensure_partitions()
    await store.publish_version("pj_default", ir.workflow_id, ir.version, ir.sha256, to_json(ir))

    async def counts() -> dict:
        c = await asyncpg.connect(url)
        await c.execute("select pg_stat_force_next_flush()")
        rows = await c.fetch("select relname, n_tup_ins, n_tup_upd, n_tup_del from pg_stat_user_tables")
        await c.close()
        return {r["relname"]: (r["n_tup_ins"], r["n_tup_upd"], r["n_tup_del"]) for r in rows}

    reg = ConnectorRegistry()
    reg.register(PassConnector())
    eng = Engine(store, reg, worker_id="bench", lease=timedelta(seconds=30), rng=random.Random(1), concurrency=16)
    run = await store.create_run("pj_default", ir.workflow_id,
                                 {"items": [{"id": f"inv-{i}", "n": i} for i in range(n)]}, f"fan-{tag}")
    await store.close()          # its counters flushed
    await asyncio.sleep(0.7)
    before = await counts()
    store = await Store.connect(url, clock=SystemClock())
    eng = Engine(store, reg, worker_id="bench", lease=timedelta(seconds=30), rng=random.Random(1), concurrency=16)
    got = await eng.drive()
    assert got == {run.run_id: "succeeded"}, got
    await reg.aclose()
    await store.close()
    await asyncio.sleep(0.7)
    after = await counts()
    per = {}
    for t, (i, u, d) in after.items():
        b = before.get(t, (0, 0, 0))
        if (i - b[0]) or (u - b[1]) or (d - b[2]):
            per[t] = [(i - b[0]) / n, (u - b[1]) / n, (d - b[2]) / n]
    return {"per_table": per, "rows": sum(x[0] + x[1] for x in per.values())}


def fanout(args, admin: str) -> None:
    import asyncpg

    res: dict[str, list[dict]] = {"A": [], "B": []}
    for block in range(args.blocks):
        for side, path in ((("A", args.a), ("B", args.b)) if block % 2 == 0 else (("B", args.b), ("A", args.a))):
            db = f"fan_{side.lower()}_{block}"

            async def mk(db=db):
                c = await asyncpg.connect(admin)
                await c.execute(f"create database {db}")
                await c.close()
            asyncio.run(mk())
            res[side].append(child(path, "fan", admin.rsplit("/", 1)[0] + "/" + db, str(args.partitions),
                                   f"{side.lower()}{block}"))
    print(f"fan-out of `pass` over {args.partitions} items, {args.blocks} runs each, "
          f"load average {os.getloadavg()[0]:.1f}: rows inserted + updated per partition")
    for side in ("A", "B"):
        rs = res[side]
        print(f"  {side}: median {statistics.median(r['rows'] for r in rs):.2f} rows/partition; by table "
              f"(inserted, updated, deleted): " + ", ".join(
                  f"{t} {tuple(round(x, 2) for x in v)}" for t, v in sorted(rs[-1]["per_table"].items())))


# ---------------------------------------------------------------------------------------------------------- main

def with_server(body) -> None:
    sys.path.insert(0, str(HERE.parent))
    from anthares44.automation.runtime.postgres.embedded import EmbeddedServer, free_port

    root = Path(tempfile.mkdtemp(prefix="a44-bench-costs-"))
    server = EmbeddedServer(root, durable=False)
    server.initdb()
    port = free_port()
    server.start(port)
    try:
        body(f"postgresql://postgres@127.0.0.1:{port}/postgres")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.path.insert(1, str(HERE))
        kind, rest = sys.argv[2], sys.argv[3:]
        if kind == "sql":
            admin, url, stats, steps = rest
            print(json.dumps(asyncio.run(_sql_child(admin, url, stats, int(steps)))))
        else:
            print(json.dumps(CHILDREN[kind](*rest)))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["sql", *MEASURES])
    ap.add_argument("--a", required=True, help="checkout of A (main's code)")
    ap.add_argument("--b", default=str(HERE.parent), help="checkout of B (default: this one)")
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--no-sweep", action="store_true", help="sql: also B without the PREPARE sweep (its cost)")
    args = ap.parse_args()
    with_server(lambda admin: (sql if args.what == "sql" else MEASURES[args.what])(args, admin))


CHILDREN: dict = {"rss": _rss_child, "fan": lambda url, n, tag: asyncio.run(_fan_child(url, int(n), tag))}
MEASURES: dict = {"rss": rss, "fanout": fanout}

if __name__ == "__main__":
    main()
