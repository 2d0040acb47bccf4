"""Webhook endpoint latency under load (SPEC §9: p99 < 200 ms at 500 requests/s) on loopback, while a daemon
drives the created runs. Report, not a test:

    .venv/bin/python bench/bench_webhooks.py [--rate 500] [--seconds 10] [--database-url URL]

Starts an embedded PostgreSQL in a temp dir (unless --database-url), publishes a webhook-triggered workflow,
runs `a44 automation serve --http-port` (workers + HTTP server) as a subprocess, and fires signed POSTs at a fixed
open-loop rate (each request starts on schedule, whatever the previous ones do). Prints p50/p90/p99/max, the
statuses, and the highest rate among --ramp whose p99 stays under 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

WORKFLOW = "name: bench-hook\nversion: 1\nsteps:\n  - id: a\n    uses: pass\n    timeout: 5s\n  - id: b\n    uses: pass\n    timeout: 5s\n"
TRIGGER = "- id: trg_bench\n  type: webhook\n  workflow: wf_bench_hook\n"
P = "pj_bench"


async def fire(url, secret, rate, seconds, tag):
    from anthares44.automation.runtime.ingestion.webhooks import sign

    lat, statuses = [], {}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as session:
        async def one(i):
            body = json.dumps({"i": i, "tag": tag}).encode()
            ts = int(time.time())
            h = {"Content-Type": "application/json", "A44-Timestamp": str(ts), "A44-Signature": sign(secret, ts, body),
                 "A44-Idempotency-Key": f"{tag}:{i}"}
            t0 = time.perf_counter()
            async with session.post(url, data=body, headers=h) as r:
                await r.read()
                statuses[r.status] = statuses.get(r.status, 0) + 1
            lat.append((time.perf_counter() - t0) * 1000)

        tasks, start, n = [], time.perf_counter(), int(rate * seconds)
        for i in range(n):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]  # noqa: E731
    return {"rate": rate, "sent": n, "achieved_rps": round(n / elapsed, 1), "p50_ms": round(q(0.50), 2),
            "p90_ms": round(q(0.90), 2), "p99_ms": round(q(0.99), 2), "max_ms": round(lat[-1], 2),
            "mean_ms": round(statistics.mean(lat), 2), "statuses": statuses}


async def main(args):
    from anthares44.automation.app.publishing import publish
    from anthares44.automation.runtime.ingestion.triggers import current_secret
    from anthares44.automation.runtime.store import Store

    server = None
    url = args.database_url
    tmp = tempfile.TemporaryDirectory(prefix="a44-bench-")
    if url is None:
        import os

        from anthares44.automation.runtime.embedded import EmbeddedServer, free_port
        os.chmod(tmp.name, 0o755)   # the server may run as another user than root
        server = EmbeddedServer(Path(tmp.name) / "pg", durable=False)
        await asyncio.to_thread(server.initdb)
        port = free_port()
        await asyncio.to_thread(server.start, port)
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    root = Path(tmp.name) / "proj"
    (root / "w").mkdir(parents=True)
    (root / "w" / "bench.yaml").write_text(WORKFLOW)
    (root / "t.yaml").write_text(TRIGGER)
    store = await Store.connect(url, results_dir=Path(tmp.name) / "results")
    await store.migrate()
    report = await publish(store, P, [str(root)])
    assert report.ok, [d.to_dict() for d in report.diagnostics]
    secret = (await current_secret(store, P, "trg_bench"))["secret"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the daemon (workers + HTTP) in its own process, as deployed: the load generator must not share its CPU
    import os
    import subprocess
    import sys

    env = dict(os.environ, A44_DATABASE_URL=url, A44_HOME=str(Path(tmp.name) / "home"))
    proc = subprocess.Popen([str(Path(sys.executable).parent / "a44"), "automation", os.environ.get("BENCH_VERB", "serve"), "--http-port",
                             str(port)] + ([] if os.environ.get("BENCH_VERB") == "ingest" else ["--concurrency", str(args.concurrency)]), env=env)
    hook = f"http://127.0.0.1:{port}/v1/{P}/trg_bench"
    for _ in range(100):
        try:
            async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/healthz") as r:
                if r.status == 200:
                    break
        except aiohttp.ClientError:
            await asyncio.sleep(0.1)
    await fire(hook, secret, 100, 1, "warmup")
    results = [await fire(hook, secret, args.rate, args.seconds, f"main{args.rate}")]
    for rate in args.ramp:
        results.append(await fire(hook, secret, rate, max(3, args.seconds // 2), f"ramp{rate}"))
    done = (await store.fetchrow("ingestion_row_counts"))["runs"]
    for r in results:
        print(json.dumps(r))
    ok = [r["rate"] for r in results if r["p99_ms"] < 200 and set(r["statuses"]) <= {200, 202}]
    print(json.dumps({"max_rate_with_p99_under_200ms": max(ok) if ok else None, "runs_in_db": done}))
    proc.terminate()
    proc.wait(30)
    await store.close()
    if server is not None:
        await asyncio.to_thread(server.stop)
    tmp.cleanup()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--ramp", type=int, nargs="*", default=[1000, 1500])
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--database-url", default=None)
    asyncio.run(main(ap.parse_args()))
