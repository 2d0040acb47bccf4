"""The cost of admission per run with flow limits (issue 30, SPEC §22): the latency of `Engine.claim(1)` for one
new run (its keys computed by the keyer, then the claim statement counting holders and granting), for a workflow
with 0, 1 and 3 limits, and with 1 limit while 100,000 live keys exist. Prints p50 / p99 / mean per case.

    .venv/bin/python bench/bench_admission.py [--runs 300] [--keys 100000]

Cases: `0 limits` (no flow: the plain claim), `1 limit` (concurrency per input.tenant, limit 5), `3 limits`
(per tenant 5 + project-wide 'all' 50 + throttle per tenant 1000/s burst 100), `1 limit, N live keys` (the 1-limit
workflow after N keys of the same limit were generated, `insert ... select generate_series`). Each run is created
untimed, claimed timed, finished untimed (slots stay free: no limit is ever full here, so the figure is the cost of
checking them). Tenants rotate over 100 values. Own embedded PostgreSQL (fsync off)."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_grants import _finish  # noqa: E402
from scratch_db import run_on_scratch_database  # noqa: E402

from anthares44.automation.app.publishing import publish  # noqa: E402
from anthares44.automation.runtime.engine import Engine  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402

PROJECT = "pj_default"
STEP = """steps:
  - id: a
    uses: pass
    timeout: 5s
"""
WORKFLOWS = {
    "none": "name: adm-none\nversion: 1\n" + STEP,
    "one": "name: adm-one\nversion: 1\nconcurrency:\n  - {key: \"input.tenant\", limit: 5}\n" + STEP,
    "three": "name: adm-three\nversion: 1\nconcurrency:\n  - {key: \"input.tenant\", limit: 5}\n"
             "  - {key: \"'all'\", limit: 50, scope: project}\n"
             "throttle: {key: \"input.tenant\", limit: 1000, per: 1s, burst: 100}\n" + STEP,
}


async def measure(store: Store, wf: str, n: int, tag: str) -> list[float]:
    eng = Engine(store, worker_id="bench", lease=timedelta(seconds=30), concurrency=1)
    lat = []
    for i in range(n + 1):
        await store.create_run(PROJECT, wf, {"tenant": f"t{i % 100}"}, f"{tag}-{i}")
        t0 = time.perf_counter()
        rows = await eng.claim(1)
        took = (time.perf_counter() - t0) * 1000
        assert len(rows) == 1, (wf, i)
        await _finish(store, rows[0]["run_id"])
        if i:                                   # the first warms the prepared statements
            lat.append(took)
    return lat


async def generate_keys(url: str, n: int) -> None:
    c = await asyncpg.connect(url)
    t0 = time.perf_counter()
    await c.execute(f"""
        insert into automation.flow_keys (project_id, key, limit_id, value, kind, max_n, created_at, used_at)
        select '{PROJECT}', 'c:wf_adm_one#0=gen' || g, 'c:wf_adm_one#0', 'gen' || g, 'concurrency', 5, now(), now()
        from generate_series(1, {n}) g""")
    await c.execute("analyze automation.flow_keys")
    live = await c.fetchval("select live_keys from automation.flow_limit_keys where limit_id = 'c:wf_adm_one#0'")
    print(f"generated {n:,} live keys in {time.perf_counter() - t0:.1f}s; the limit counts {live:,}")
    await c.close()


def summary(lat: list[float]) -> str:
    q = statistics.quantiles(lat, n=100)
    return f"p50 {statistics.median(lat):.3f} ms  p99 {q[98]:.3f} ms  mean {statistics.fmean(lat):.3f} ms"


async def main_async(args, url: str) -> None:
    store = await Store.connect(url)
    await store.migrate()
    await store.ensure_partitions()
    d = Path(tempfile.mkdtemp())
    for name, text in WORKFLOWS.items():
        (d / f"{name}.yaml").write_text(text)
    rep = await publish(store, PROJECT, [str(d / f"{n}.yaml") for n in WORKFLOWS])
    assert not rep.errors, [x.to_dict() for x in rep.diagnostics]
    medians = {}
    for label, wf in (("0 limits", "wf_adm_none"), ("1 limit", "wf_adm_one"), ("3 limits", "wf_adm_three")):
        lat = await measure(store, wf, args.runs, label.replace(" ", ""))
        medians[label] = statistics.median(lat)
        print(f"admission, {label:<24} {summary(lat)}")
    await generate_keys(url, args.keys)
    label = f"1 limit, {args.keys:,} live keys"
    lat = await measure(store, "wf_adm_one", args.runs, "many")
    medians[label] = statistics.median(lat)
    print(f"admission, {label:<24} {summary(lat)}")
    base = medians["0 limits"]
    print("medians: " + ", ".join(f"{k} {v:.3f} ms (x{v / base:.2f})" for k, v in medians.items()))
    await store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--keys", type=int, default=100_000)
    args = ap.parse_args()
    run_on_scratch_database("a44-bench-admission-", lambda url: main_async(args, url))


if __name__ == "__main__":
    main()
