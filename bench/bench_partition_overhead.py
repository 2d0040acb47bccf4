"""Overhead of a partition against a plain step (issue 13): the same no-op connector called N times, once as N
sequential plain steps and once as one fan-out step of N partitions, driven in-process by one `Engine` on a
throwaway embedded PostgreSQL (fsync off: the figure is the interpreter's and the store's cost, not the disk's).
Prints per call the median over --repeat runs: milliseconds per plain step, per partition at concurrency 1 (the
same sequential shape) and at --concurrency (partitions in flight at once), and the ratio partition/step.

    .venv/bin/python bench/bench_partition_overhead.py [--n 200] [--repeat 5] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scratch_db import run_on_scratch_database  # noqa: E402

from anthares44.automation.compiler.ir import (  # noqa: E402
    ConcurrencyIR,
    ConnectorRef,
    Expr,
    NodeIR,
    PartitionsIR,
    RetryIR,
    WorkflowIR,
    seal,
    to_json,
)
from anthares44.automation.grammar import compile_expression  # noqa: E402
from anthares44.automation.runtime.engine import Engine  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry  # noqa: E402

PROJECT = "pj_default"


class Noop:
    """A connector with an external effect as far as the interpreter knows (it gets a `running` row first)."""

    name = "noop"
    params_model = None

    async def invoke(self, params, ctx):
        return {"ok": True}


def _node(i: int, step_id: str, partitions: PartitionsIR | None = None) -> NodeIR:
    return NodeIR(id=step_id, index=i, kind="call", connector=ConnectorRef(uses="noop", kind="builtin", type=None),
                  timeout_ms=5_000, retry=RetryIR(max=0, strategy="none", base_ms=1_000, cap_ms=1_000),
                  compensate=None, condition=None, exclusive=False, sleep_ms=None, params={}, partitions=partitions)


def _workflow(name: str, nodes: list[NodeIR]) -> WorkflowIR:
    return seal(WorkflowIR(workflow_id=f"wf_{name}", name=name, version=1, queue="q_default",
                           concurrency=ConcurrencyIR(max=100), deadline_ms=3_600_000, lease_ms=30_000, triggers=(),
                           nodes=tuple(nodes), edges=tuple((a.id, b.id) for a, b in zip(nodes, nodes[1:]))))


def plain(n: int) -> WorkflowIR:
    return _workflow("plain", [_node(i, f"s{i}") for i in range(n)])


def fanned(concurrency: int) -> WorkflowIR:
    prog = compile_expression("input.keys", roots={"input", "steps", "trigger", "run"}).program.to_ir()
    spec = PartitionsIR(foreach=Expr(cel="input.keys", program=prog), range_from=None, range_to=None, every_ms=None,
                        concurrency=concurrency, on_failure="fail")
    return _workflow(f"fan{concurrency}", [_node(0, "load", spec)])


async def one_run(store: Store, engine: Engine, ir: WorkflowIR, n: int, key: str) -> float:
    await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    run = await store.create_run(PROJECT, ir.workflow_id, {"keys": [f"p{i}" for i in range(n)]}, key)
    t0 = time.perf_counter()
    got = await engine.drive()
    took = time.perf_counter() - t0
    assert got == {run.run_id: "succeeded"}, got
    return took / n * 1000


async def bench(url: str, n: int, repeat: int, concurrency: int) -> None:
    store = await Store.connect(url, results_dir=Path(os.environ.get("TMPDIR", "/tmp")) / "a44-bench-overhead")
    await store.migrate()
    await store.ensure_partitions()
    reg = ConnectorRegistry()
    reg.register(Noop())
    engine = Engine(store, reg, worker_id="bench", concurrency=4)
    shapes = {"plain step": plain(n), "partition (concurrency 1)": fanned(1),
              f"partition (concurrency {concurrency})": fanned(concurrency)}
    figures: dict[str, list[float]] = {k: [] for k in shapes}
    for r in range(repeat + 1):          # the first round warms caches and is dropped
        for label, ir in shapes.items():
            ms = await one_run(store, engine, ir, n, f"{label}-{r}")
            if r:
                figures[label].append(ms)
    await reg.aclose()
    await store.close()
    base = statistics.median(figures["plain step"])
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} CPUs; N={n} calls per run; median of {repeat}")
    for label, xs in figures.items():
        med = statistics.median(xs)
        print(f"{label:>28}: {med:7.3f} ms per call   x{med / base:.2f} of a plain step")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    run_on_scratch_database("a44-bench-overhead-", lambda url: bench(url, args.n, args.repeat, args.concurrency))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
