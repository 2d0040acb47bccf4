"""Compile time against step count (issue 10): one workflow of 1,000 .. 14,000 steps, compiled to IR by
`compiler.lint.lint_paths` in-process (best of --reps), with the time per step and the ratio to the previous
size (2.0 per doubling is linear, 4.0 quadratic). Steps come from `workflow_gen.long_workflow_yaml`: pass steps
with `needs`, `if:` and templates reading earlier steps, and sleeps; `--misspelt` makes every step name a step
that does not exist instead (one diagnostic with a hint per step).

    .venv/bin/python bench/bench_compile_scale.py [--steps 1000,2000,4000] [--reps 3] [--misspelt]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from workflow_gen import long_workflow_yaml  # noqa: E402

from anthares44.automation.compiler.lint import lint_paths  # noqa: E402


def measure(path: Path, reps: int) -> tuple[float, float, int]:
    """(best wall seconds, best CPU seconds, diagnostics) over `reps` compiles."""
    wall, cpu, found = float("inf"), float("inf"), 0
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        result = lint_paths([str(path)], lower=True)
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
        found = len(result.diagnostics)
    return wall, cpu, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", help="comma-separated step counts (default 1000..14000; 1000..8000 with "
                                        "--misspelt, whose steps hold more values: 14,000 exceed the parser's budget)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--misspelt", action="store_true")
    args = parser.parse_args()
    args.steps = args.steps or ("1000,2000,4000,8000" if args.misspelt else "1000,2000,4000,8000,14000")
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} CPUs; best of {args.reps}; "
          f"{'misspelt references' if args.misspelt else 'valid workflow'}")
    print(f"{'steps':>7} {'bytes':>9} {'wall s':>8} {'cpu s':>8} {'us/step':>8} {'ratio':>6} {'diagnostics':>11}")
    previous = None
    with tempfile.TemporaryDirectory(prefix="a44-bench-scale-") as tmp:
        for n in (int(s) for s in args.steps.split(",")):
            path = Path(tmp) / f"steps-{n}.yaml"
            path.write_text(long_workflow_yaml(n, args.misspelt), encoding="utf-8")
            wall, cpu, found = measure(path, args.reps)
            ratio = f"{2 ** (math.log(cpu / previous[1]) / math.log(n / previous[0])):.2f}" if previous else "-"
            print(f"{n:>7,} {path.stat().st_size:>9,} {wall:>8.2f} {cpu:>8.2f} {cpu / n * 1e6:>8.0f} "
                  f"{ratio:>6} {found:>11,}")
            previous = (n, cpu)
    print("ratio: growth of CPU time per doubling of steps, from the previous size (2.00 linear, 4.00 quadratic)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
