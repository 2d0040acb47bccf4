"""Cost of row counts and expectations per step (docs/rows.md). Not a test: it prints figures.

    .venv/bin/python bench/bench_rows.py [--runs 300] [--reps 3]

On a scratch embedded PostgreSQL (fsync off), an in-process engine drives --runs runs of a 3-step `pass`
workflow, compiled from YAML, twice: plain, and with `rows: {in, out, error}` plus one `expect:` on every step
(3 CEL counts and 1 condition evaluated off the event loop, and one `step_rows` row written per step in the
attempt's transaction). Prints the best wall time per run of each and the difference per step.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scratch_db import run_on_scratch_database  # noqa: E402

from anthares44.automation.clock import SystemClock  # noqa: E402
from anthares44.automation.compiler.ir import to_json  # noqa: E402
from anthares44.automation.compiler.lint import compile_sources  # noqa: E402
from anthares44.automation.compiler.source import load_text  # noqa: E402
from anthares44.automation.runtime.engine import Engine  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402
from anthares44.automation.stdlib_connectors.pass_ import PassConnector  # noqa: E402
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry  # noqa: E402

STEP = """  - id: s{i}
    uses: pass
    timeout: 1s
    output: {{n: 10, bad: 1}}
"""
COUNTED = """    rows: {in: "result.n", out: "result.n - result.bad", error: "result.bad"}
    expect: "rows.in > 0"
"""


def ir_of(name: str, counted: bool):
    text = f"name: {name}\nversion: 1\nsteps:\n" + "".join(
        STEP.format(i=i) + (COUNTED if counted else "") for i in range(3))
    res = compile_sources([load_text(text, "w.yaml")], "lint", lower=True)
    (ir,) = res.irs.values()
    return ir


async def drive(store: Store, ir, runs: int, tag: str) -> float:
    await store.publish_version("pj_default", ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    for i in range(runs):
        await store.create_run("pj_default", ir.workflow_id, {}, f"{tag}-{i}")
    reg = ConnectorRegistry()
    reg.register(PassConnector())
    eng = Engine(store, reg, worker_id="bench", lease=timedelta(seconds=30), rng=random.Random(1), concurrency=16)
    t0 = time.perf_counter()
    await eng.drive()
    return (time.perf_counter() - t0) / runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    async def body(url: str) -> None:
        store = await Store.connect(url, clock=SystemClock())
        await store.migrate()
        await store.ensure_partitions()
        best = {False: float("inf"), True: float("inf")}
        for rep in range(args.reps):
            for counted in (False, True):
                name = f"{'counted' if counted else 'plain'}-{rep}"
                best[counted] = min(best[counted], await drive(store, ir_of(name, counted), args.runs, name))
        await store.close()
        plain, counted = best[False] * 1000, best[True] * 1000
        print(f"plain 3-step run: {plain:.2f} ms/run; with rows + expect on every step: {counted:.2f} ms/run; "
              f"overhead {(counted - plain) / 3:.2f} ms/step (best of {args.reps}, {args.runs} runs each)")

    run_on_scratch_database("a44-bench-rows-", body)


if __name__ == "__main__":
    main()
