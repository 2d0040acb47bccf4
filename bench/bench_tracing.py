"""Tracing benchmark (§16, docs/observability.md). Not a test: it prints figures.

    .venv/bin/python bench/bench_tracing.py            # 5 repeats of 300 runs x 3 steps per mode
    .venv/bin/python bench/bench_tracing.py --quick

Measures, with its own embedded PostgreSQL (non-durable, like the test fixtures: the figure of interest is what
tracing adds, not the commit cost) and the in-process engine:
  (a) per-attempt wall time of driving runs with tracing off (no OTEL_* variable: no tracer) and on (the real SDK,
      BatchSpanProcessor, OTLP/HTTP exporter to a receiver process on 127.0.0.1 decoding every request); the
      modes alternate, the summary quotes medians;
  (b) the tracing work alone per attempt (span built, ended, queued to the batch processor), without the database;
  (c) import cost: the core `tracing` module (no opentelemetry), and the SDK + exporter a traced daemon loads.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from anthares44.automation import tracing  # noqa: E402
from anthares44.automation.attempts import Attempt  # noqa: E402
from anthares44.automation.compiler.ir import to_json  # noqa: E402
from anthares44.automation.runtime.engine.spans import VisitSpans  # noqa: E402
from anthares44.automation.runtime.engine.worker import Engine  # noqa: E402
from anthares44.automation.runtime.postgres.embedded import EmbeddedServer, free_port  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402
from tests.runtime.daemon_support import call  # noqa: E402
from tests.runtime.engine_support import workflow  # noqa: E402

PROJECT = "pj_default"
RECEIVER = ("import sys; from tests.observability.otlp_receiver import OtlpReceiver; r = OtlpReceiver(); "
            "print(r.port, flush=True); sys.stdin.read(); print(len(r.spans))")
STEPS = 3


async def _drive_batch(store: Store, ir, tracer, n: int, tag: str) -> float:
    """Seconds per attempt to drive `n` fresh runs of `ir` to the end."""
    for i in range(n):
        await store.create_run(PROJECT, ir.workflow_id, {}, f"{tag}-{i}")
    engine = Engine(store, tracer=tracer, concurrency=16)
    t0 = time.perf_counter()
    await engine.drive()
    await engine.notifier.drain()
    return (time.perf_counter() - t0) / (n * STEPS)


async def end_to_end(url: str, runs: int, repeat: int, tracer) -> dict[str, list[float]]:
    store = await Store.connect(url, results_dir=Path(tempfile.mkdtemp(prefix="a44-bench-results-")))
    try:
        await store.migrate()
        ir = workflow([call(f"s{i}", "pass", {"output": {"n": i}}) for i in range(STEPS)], name="bench_trace")
        await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        await _drive_batch(store, ir, None, runs, "warm-off")          # warm caches, the pool and the SDK
        await _drive_batch(store, ir, tracer, runs, "warm-on")
        out: dict[str, list[float]] = {"off": [], "on": []}
        for r in range(repeat):
            out["off"].append(await _drive_batch(store, ir, None, runs, f"off-{r}"))
            out["on"].append(await _drive_batch(store, ir, tracer, runs, f"on-{r}"))
        return out
    finally:
        await store.close()


def tracing_work_alone(tracer, rounds: int = 20, n: int = 1000) -> float:
    """Median seconds per attempt of what the engine does for a span (VisitSpans.ended + committed), no database;
    `n` spans a round (under the batch processor's 2,048-span queue), exported between rounds, untimed."""
    now = datetime.now(UTC)
    row = {"run_id": "run_01JBENCH0000000000000000AA", "created_at": now, "workflow_id": "wf_b", "version": 1,
           "queue": None, "epoch": 0, "partition_key": "p", "lease_grants": 1}
    spans = VisitSpans(tracer, row, "bench", None)
    a = Attempt("s1", "action", 1, "running", now)
    end = now + timedelta(milliseconds=3)
    per = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            spans.ended(a, "succeeded", end, None, None)
            spans.committed()
        per.append((time.perf_counter() - t0) / n)
        tracer.flush()
    return statistics.median(per)


def import_ms(statement: str) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print((time.perf_counter() - t) * 1000)"
    vals = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                 cwd=ROOT).stdout) for _ in range(5)]
    return statistics.median(vals)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.repeat = 60, 2
    # the receiver is a separate process, as a collector is: its decoding does not compete for this one's GIL
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], cwd=ROOT, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    port = int(receiver.stdout.readline())
    os.environ.update({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", "OTEL_BSP_SCHEDULE_DELAY": "200",
                       "OTEL_SERVICE_NAME": "a44-bench"})
    tracer = tracing.from_environment()
    root = Path(tempfile.mkdtemp(prefix="a44-bench-tracing-"))
    server = EmbeddedServer(root / "pg", durable=False)
    try:
        server.initdb()
        port = free_port()
        server.start(port, wait_s=30)
        figures = asyncio.run(end_to_end(f"postgresql://postgres@127.0.0.1:{port}/postgres", args.runs,
                                         args.repeat, tracer))
        alone = tracing_work_alone(tracer)
        tracer.shutdown()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        received, _ = receiver.communicate("", timeout=30)
    off, on = statistics.median(figures["off"]) * 1e6, statistics.median(figures["on"]) * 1e6
    print(f"runs of {STEPS} `pass` steps, {args.runs} runs x {args.repeat} repeats per mode (in-process engine)")
    print(f"  per attempt, tracing off : {off:8.1f} us   (repeats: "
          f"{', '.join(f'{v * 1e6:.1f}' for v in figures['off'])})")
    print(f"  per attempt, tracing on  : {on:8.1f} us   (repeats: "
          f"{', '.join(f'{v * 1e6:.1f}' for v in figures['on'])})")
    print(f"  difference (median)      : {on - off:+8.1f} us per attempt ({(on - off) / off * 100:+.1f} %), "
          f"spans received: {received.strip()}")
    print(f"  tracing work alone       : {alone * 1e6:8.1f} us per attempt span (SDK, no database)")
    print(f"import anthares44.automation.tracing     : {import_ms('import anthares44.automation.tracing'):6.1f} ms "
          f"(opentelemetry not imported)")
    print(f"import the SDK + OTLP/HTTP exporter       : "
          f"{import_ms('import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http.trace_exporter'):6.1f}"
          f" ms (only when an OTEL_* variable asks for traces)")


if __name__ == "__main__":
    main()
