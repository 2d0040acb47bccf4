"""Benchmark of the replay gate (not a test: prints figures; docs/verify.md).

    .venv/bin/python bench/bench_verify.py [--histories 10000] [--steps 12]

Writes N synthetic `runs export` histories of a code workflow of S steps (all succeeded) and times one
`a44 automation verify` process on them twice: against a version that swaps steps 2 and 3 (every history
diverges, exit 1) and against the same change behind `step.patched` (none diverges, exit 0). Reports histories
replayed per second (wall time of the whole process, import and JSON parsing included).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def module(steps: int, version: int, swap: bool, patched: bool) -> str:
    ids = [f"s{i}" for i in range(steps)]
    body = []
    for i, sid in enumerate(ids):
        if i == 1 and (swap or patched):
            if patched:
                body.append('    first, second = ("s2", "s1") if step.patched("swap") else ("s1", "s2")')
            else:
                body.append('    first, second = "s2", "s1"')
            body.append("    await step.run(first, fn=lambda: 1)")
            body.append("    await step.run(second, fn=lambda: 1)")
            continue
        if i == 2 and (swap or patched):
            continue
        body.append(f'    await step.run("{sid}", fn=lambda: 1)')
    return ("from anthares44.automation import workflow, step\n\n\n"
            f'@workflow("bench", version={version})\nasync def bench(ctx, input):\n' + "\n".join(body)
            + "\n    return {}\n")


def history(n: int, steps: int) -> dict:
    at = "2026-07-19T14:00:00+00:00"
    return {"run": {"run_id": f"run_{n:08d}", "workflow_id": "wf_bench", "version": 1, "state": "succeeded",
                    "epoch": 0, "input": {"n": n}, "idempotency_key": f"k{n}"},
            "attempts": [{"step_id": f"s{i}", "kind": "action", "attempt": 1, "status": "succeeded", "epoch": 0,
                          "started_at": at, "finished_at": at, "result": {"i": i, "n": n}} for i in range(steps)]}


def timed(args: list[str]) -> tuple[float, int]:
    t = time.perf_counter()
    rc = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.perf_counter() - t, rc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--histories", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=12)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        export = tmp / "export.jsonl"
        with export.open("w") as f:
            for n in range(a.histories):
                f.write(json.dumps(history(n, a.steps)) + "\n")
        for name, swap, patched in (("swapped", True, False), ("patched", False, True)):
            (tmp / f"{name}.py").write_text(module(a.steps, 2, swap, patched))
            secs, rc = timed([str(BIN / "a44"), "automation", "verify", str(tmp / f"{name}.py"), "--histories",
                              str(export), "--format", "json"])
            print(f"{name}: {a.histories} histories of {a.steps} steps in {secs:.2f} s "
                  f"({a.histories / secs:,.0f}/s), exit {rc}")


if __name__ == "__main__":
    main()
