"""Fan-out over items at scale (issue 29, SPEC §21): one run of one `foreach` step over 10,000 and 100,000 items,
driven by ONE real `a44 automation serve` subprocess (a fresh one per measurement) on an embedded PostgreSQL with
the product's settings (fsync, synchronous_commit and full_page_writes on), beside the physical limit measured in
the same run.

Shapes (each item `{"id": "inv-<i>", "n": i}`, `key: "item.id"`, concurrency 64):
- `pass` items over 10,000 and 100,000: the step renders `{{ item.id }}` / `{{ item.n }}` per item;
- loopback HTTP items over 10,000: `GET http://127.0.0.1:PORT/item/{{ item.id }}` answered by an aiohttp server in
  its own process (its CPU is neither the daemon's nor PostgreSQL's);
- 100,000 HTTP items of which 1,000 answer 422 (permanent): the run ends `partial`; the far side is fixed and its
  counts reset; `replay RUN --failed-partitions`: the far side must see exactly those 1,000 items, once each.

Per shape: wall time (the run's created_at to finished_at, the database's clock), items/s; PostgreSQL rows
written per item (pg_stat_database tup_inserted + tup_updated + tup_deleted, read after the daemon exited so its
counters are flushed), WAL bytes per item (pg_current_wal_lsn before/after) and database bytes per item
(pg_database_size before/after); the daemon's peak RSS (VmHWM). Then the per-item cost at 100,000 over that at
10,000 (target: within 1.5x) and the figures beside the physical limit: single-row INSERT commits/s on one
connection and a bare bulk INSERT's rows/s and WAL bytes per row, on the same server in the same run.

    .venv/bin/python bench/bench_fanout.py                       # 10,000 shapes x3 (medians), 100,000 shapes x1
    .venv/bin/python bench/bench_fanout.py --repeat 1 --small 2000 --large 20000 --fail 200     # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
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

import bench_runtime as br  # noqa: E402
from runtime_limits import raw_inserts  # noqa: E402

from anthares44.automation.runtime.store.core import Store  # noqa: E402

PROJECT = br.PROJECT
PASS_WF = """
name: fan-pass
version: 1
steps:
  - id: each
    uses: pass
    timeout: 10s
    output: {id: "{{ item.id }}", n: "{{ item.n }}"}
    partitions: {foreach: "input.items", key: "item.id", concurrency: 64}
"""
HTTP_WF = """
name: fan-http
version: 1
steps:
  - id: each
    uses: http
    timeout: 10s
    url: "http://127.0.0.1:PORT/item/{{ item.id }}"
    partitions: {foreach: "input.items", key: "item.id", concurrency: 64}
    onPartitionFailure: partial
"""
FINAL = ("succeeded", "partial", "failed", "compensation_failed", "cancelled")


# --- the far side (its own process: `bench_fanout.py --far-side`) ---------------------------------------------
async def far_side() -> None:
    from aiohttp import web

    calls: dict[str, int] = {}
    failing: set[str] = set()

    async def item(request: web.Request) -> web.Response:
        key = request.match_info["key"]
        calls[key] = calls.get(key, 0) + 1
        if key in failing:
            return web.json_response({"error": "rejected"}, status=422)
        return web.json_response({"ok": True, "id": key})

    async def control(request: web.Request) -> web.Response:
        body = await request.json()
        if "fail" in body:
            failing.clear()
            failing.update(body["fail"])
        if body.get("reset"):
            calls.clear()
        return web.json_response({"ok": True})

    async def counts(_request: web.Request) -> web.Response:
        return web.json_response({"calls": sum(calls.values()), "keys": sorted(calls),
                                  "twice": sorted(k for k, n in calls.items() if n > 1)})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/item/{key}", item)
    app.router.add_post("/control", control)
    app.router.add_get("/counts", counts)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


class FarSide:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, __file__, "--far-side"], stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())
        self.base = f"http://127.0.0.1:{self.port}"

    async def control(self, **body) -> None:
        import aiohttp

        async with aiohttp.ClientSession() as s, s.post(self.base + "/control", json=body) as r:
            r.raise_for_status()

    async def counts(self) -> dict:
        import aiohttp

        async with aiohttp.ClientSession() as s, s.get(self.base + "/counts") as r:
            return await r.json()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


# --- what PostgreSQL did ----------------------------------------------------------------------------------------
async def snapshot(url: str) -> dict:
    c = await asyncpg.connect(url)
    try:
        await c.execute("select pg_stat_clear_snapshot()")
        row = await c.fetchrow(
            "select pg_current_wal_lsn()::text as lsn, pg_database_size(current_database()) as size, "
            "tup_inserted + tup_updated + tup_deleted as tuples "
            "from pg_stat_database where datname = current_database()")
        return dict(row)
    finally:
        await c.close()


async def delta(url: str, before: dict, after: dict) -> dict:
    c = await asyncpg.connect(url)
    try:
        wal = await c.fetchval("select pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)", after["lsn"], before["lsn"])
    finally:
        await c.close()
    return {"wal": float(wal), "size": after["size"] - before["size"], "tuples": after["tuples"] - before["tuples"]}


async def settled(url: str) -> dict:
    """A snapshot once closed backends' counters are in (they flush at exit): read until two agree."""
    a = await snapshot(url)
    for _ in range(20):
        await asyncio.sleep(0.5)
        b = await snapshot(url)
        if b["tuples"] == a["tuples"]:
            return b
        a = b
    return a


async def wait_final(url: str, run_id: str, limit_s: float) -> asyncpg.Record:
    c = await asyncpg.connect(url)
    try:
        t0 = time.monotonic()
        while True:
            row = await c.fetchrow("select state, extract(epoch from finished_at - created_at) as took, epoch, "
                                   "extract(epoch from updated_at) as at from automation.runs where run_id = $1",
                                   run_id)
            if row["state"] in FINAL:
                return row
            if time.monotonic() - t0 > limit_s:
                raise RuntimeError(f"run {run_id} still {row['state']} after {limit_s:.0f} s")
            await asyncio.sleep(0.25)
    finally:
        await c.close()


def items(n: int) -> list[dict]:
    return [{"id": f"inv-{i}", "n": i} for i in range(n)]


async def start_run(url: str, home: Path, workflow: str, n: int) -> str:
    store = await Store.connect(url, results_dir=home / "results")
    try:
        run = await store.create_run(PROJECT, workflow, {"items": items(n)}, f"{workflow}-{n}-{time.monotonic_ns()}")
        return run.run_id
    finally:
        await store.close()


# --- one measurement --------------------------------------------------------------------------------------------
async def measure(url: str, home: Path, workflow: str, n: int, limit_s: float) -> dict:
    await br.truncate(url)
    before = await settled(url)
    d = br.DaemonProc(url, home, 8)
    try:
        run_id = await start_run(url, home, workflow, n)
        row = await wait_final(url, run_id, limit_s)
        hwm = d.status("VmHWM")
    finally:
        d.stop()
    used = await delta(url, before, await settled(url))
    took = float(row["took"])
    return {"run_id": run_id, "state": row["state"], "n": n, "wall_s": took, "items_s": n / took,
            "ms_item": took * 1000 / n, "rows_item": used["tuples"] / n, "wal_item": used["wal"] / n,
            "bytes_item": used["size"] / n, "hwm_mb": hwm}


async def rerun_failed(url: str, home: Path, far: FarSide, n: int, fail: int, limit_s: float) -> dict:
    """`fail` of `n` HTTP items answer 422: partial; fixed far side, counts reset; replay --failed-partitions."""
    from anthares44.automation.app.automation import Automation
    from anthares44.automation.app.replay import replay

    failing = [f"inv-{i}" for i in range(0, n, n // fail)][:fail]
    await far.control(fail=failing, reset=True)
    first = await measure(url, home, "wf_fan_http", n, limit_s)
    seen_first = await far.counts()
    print(f"  http {n:,} ({fail:,} failing): {first['state']} in {first['wall_s']:.1f} s ({first['items_s']:,.0f} "
          f"items/s), {first['rows_item']:.1f} rows/item, {first['wal_item']:,.0f} WAL B/item, "
          f"{first['bytes_item']:,.0f} DB B/item, daemon peak RSS {first['hwm_mb']:,.0f} MB; the far side saw "
          f"{seen_first['calls']:,} calls", flush=True)
    await far.control(fail=[], reset=True)
    c = await asyncpg.connect(url)
    failed_rows = await c.fetchval("select count(*) from automation.run_partitions where run_id = $1 and state in "
                                   "('failed', 'timeout')", first["run_id"])
    await c.close()
    store = await Store.connect(url, results_dir=home / "results")
    d = br.DaemonProc(url, home, 8)
    try:
        t0 = time.monotonic()
        await replay(Automation(store), [first["run_id"]], failed_partitions=True)
        row = await wait_final(url, first["run_id"], limit_s)
        took = time.monotonic() - t0
    finally:
        d.stop()
        await store.close()
    seen = await far.counts()
    return {"first": first, "first_calls": seen_first["calls"], "failed_rows": failed_rows,
            "rerun_state": row["state"], "rerun_epoch": row["epoch"], "rerun_s": took, "calls": seen["calls"],
            "distinct": len(seen["keys"]), "exactly": sorted(seen["keys"]) == sorted(failing),
            "twice": len(seen["twice"])}


async def limits(url: str) -> dict:
    """The physical limit on this server, now: single-row INSERT commits/s (1 connection) and a bare bulk INSERT
    of 100,000 rows the size of an item's attempt row (rows/s, WAL bytes per row)."""
    single = await raw_inserts(url, 1, 3.0)
    c = await asyncpg.connect(url)
    try:
        await c.execute("create table if not exists bench_bulk (id bigserial primary key, k text, v jsonb)")
        lsn0 = await c.fetchval("select pg_current_wal_lsn()::text")
        t0 = time.perf_counter()
        await c.execute("insert into bench_bulk (k, v) select 'each[inv-' || i || ']', "
                        "jsonb_build_object('id', 'inv-' || i, 'n', i) from generate_series(1, 100000) i")
        dt = time.perf_counter() - t0
        wal = await c.fetchval("select pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)", lsn0)
        await c.execute("drop table bench_bulk")
    finally:
        await c.close()
    return {"single_commits_s": single, "bulk_rows_s": 100_000 / dt, "bulk_wal_row": float(wal) / 100_000}


def med(xs: list[dict], key: str) -> float:
    return statistics.median(x[key] for x in xs)


def line(label: str, xs: list[dict]) -> str:
    return (f"| {label} | {len(xs)} | {med(xs, 'wall_s'):,.1f} | {med(xs, 'items_s'):,.0f} | "
            f"{med(xs, 'ms_item'):.3f} | {med(xs, 'rows_item'):.1f} | {med(xs, 'wal_item'):,.0f} | "
            f"{med(xs, 'bytes_item'):,.0f} | {med(xs, 'hwm_mb'):,.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--far-side", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--small", type=int, default=10_000)
    ap.add_argument("--large", type=int, default=100_000)
    ap.add_argument("--fail", type=int, default=1_000, help="items of the large HTTP run that answer 422")
    ap.add_argument("--repeat", type=int, default=3, help="repeats of the small shapes (medians)")
    ap.add_argument("--repeat-large", type=int, default=1, help="repeats of the large pass shape")
    ap.add_argument("--limit-s", type=float, default=1800.0, help="give up on a run after this long")
    ap.add_argument("--pass-only", action="store_true", help="only the pass shapes (no HTTP, no re-run)")
    ap.add_argument("--rerun-only", action="store_true", help="only the large HTTP run with failures and its re-run")
    args = ap.parse_args()
    if args.far_side:
        asyncio.run(far_side())
        return
    root = Path(tempfile.mkdtemp(prefix="a44-bench-fanout-"))
    home = root / "home"
    home.mkdir()
    server, url = br.start_server(root / "pg", True)
    far = FarSide()
    res: dict[str, list[dict]] = {"small pass": [], "large pass": [], "small http": []}
    try:
        asyncio.run(br.prepare(url, home, {"fan-pass.yaml": PASS_WF,
                                           "fan-http.yaml": HTTP_WF.replace("PORT", str(far.port))}))
        lim = asyncio.run(limits(url))
        print(f"# physical limit now: {lim['single_commits_s']:,.0f} single-row INSERT commits/s (1 connection); "
              f"bulk INSERT {lim['bulk_rows_s']:,.0f} rows/s, {lim['bulk_wal_row']:,.0f} WAL bytes/row", flush=True)
        # small and large pass runs alternate, so that both see the machine's load of the same minutes
        plan = []
        for i in range(max(args.repeat, args.repeat_large)):
            plan += [("small pass", "wf_fan_pass", args.small)] if i < args.repeat else []
            plan += [("large pass", "wf_fan_pass", args.large)] if i < args.repeat_large else []
        plan += [] if args.pass_only else [("small http", "wf_fan_http", args.small)] * args.repeat
        plan = [] if args.rerun_only else plan
        for label, wf, n in plan:
            x = asyncio.run(measure(url, home, wf, n, args.limit_s))
            res[label].append(x)
            print(f"  {label} {n:,}: {x['state']} in {x['wall_s']:.1f} s ({x['items_s']:,.0f} items/s), "
                  f"{x['rows_item']:.1f} rows/item, {x['wal_item']:,.0f} WAL B/item, {x['bytes_item']:,.0f} DB "
                  f"B/item, daemon peak RSS {x['hwm_mb']:,.0f} MB", flush=True)
        rr = None if args.pass_only else asyncio.run(rerun_failed(url, home, far, args.large, args.fail, args.limit_s))
        lim2 = asyncio.run(limits(url))
    finally:
        far.stop()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n## one `foreach` step, key item.id, concurrency 64; one `a44 automation serve` per run; fsync on; "
          f"medians of {args.repeat} (small) / {args.repeat_large} (large pass)")
    print("| shape | runs | wall s | items/s | ms/item | PG rows/item | WAL B/item | DB B/item | daemon peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    if rr is not None:
        print(f"# re-run: {rr}", flush=True)
    if not args.rerun_only:
        print(line(f"pass x {args.small:,}", res["small pass"]))
        print(line(f"pass x {args.large:,}", res["large pass"]))
    if rr is not None:
        if res["small http"]:
            print(line(f"http x {args.small:,}", res["small http"]))
        print(line(f"http x {args.large:,} ({args.fail:,} failing)", [rr["first"]]))
    s, big = res["small pass"], res["large pass"]
    if args.rerun_only:
        s = big = [rr["first"]]
    print("" if args.rerun_only else f"\nper-item cost, {args.large:,} over {args.small:,} pass items (target <= 1.5): "
          f"wall {med(big, 'ms_item') / med(s, 'ms_item'):.2f}x, PG rows {med(big, 'rows_item') / med(s, 'rows_item'):.2f}x, "
          f"WAL bytes {med(big, 'wal_item') / med(s, 'wal_item'):.2f}x, DB bytes "
          f"{med(big, 'bytes_item') / med(s, 'bytes_item'):.2f}x")
    single = statistics.median([lim["single_commits_s"], lim2["single_commits_s"]])
    bulk = statistics.median([lim["bulk_rows_s"], lim2["bulk_rows_s"]])
    print(f"physical limit, same run (median of before/after): {single:,.0f} single-row INSERT commits/s, bulk INSERT "
          f"{bulk:,.0f} rows/s at {lim['bulk_wal_row']:,.0f} WAL B/row; pass items at {args.large:,}: "
          f"{med(big, 'items_s'):,.0f}/s = {med(big, 'items_s') / single:.2f}x the single-row commit rate, "
          f"{med(big, 'items_s') * med(big, 'rows_item') / bulk:.2f} of the bulk row rate; "
          f"{med(big, 'wal_item') / lim['bulk_wal_row']:.1f} bare rows' WAL per item")
    if rr is None:
        return
    print(f"\nre-run of the failed only: first run {rr['first']['state']}, the far side saw {rr['first_calls']:,} calls, "
          f"{rr['failed_rows']:,} partitions failed for good; after `replay --failed-partitions` (epoch "
          f"{rr['rerun_epoch']}, {rr['rerun_state']} in {rr['rerun_s']:.1f} s) the far side saw {rr['calls']:,} calls "
          f"over {rr['distinct']:,} distinct items, exactly the {args.fail:,} failed ones: {rr['exactly']}, "
          f"called twice: {rr['twice']}")


if __name__ == "__main__":
    main()
