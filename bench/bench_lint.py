"""Benchmark of the lint front end (not a test: prints figures; targets from issue 2).

    .venv/bin/python bench/bench_lint.py [--files 1000] [--reps 200]

Reports
  1. median in-process compile time of one 10-step workflow file (`compiler.lint.lint_paths`),
  2. files linted per second over N generated workflow files by one `a44 automation lint DIR` process
     (median of 3), against `check-jsonschema --schemafile schemas/any.json` (or any.schema.json) on the same files (ratio),
  3. cold start of `a44 automation lint ONEFILE` (median of 10) next to `python -c pass` (the floor),
  4. whether the lint path imports asyncpg / aiohttp, and the slowest imports (`python -X importtime`).
Targets: cold start < 300 ms; 1,000 files < 5 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workflow_gen import write_workflows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
A44 = str(BIN / "a44") if (BIN / "a44").exists() else (shutil.which("a44") or "a44")
CHECK_JSONSCHEMA = str(BIN / "check-jsonschema") if (BIN / "check-jsonschema").exists() \
    else shutil.which("check-jsonschema")
COLD_START_TARGET_MS = 300
THOUSAND_FILES_TARGET_S = 5.0


def timed_run(cmd: list[str], cwd: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    return time.perf_counter() - start, proc


def median_run(cmd: list[str], reps: int, cwd: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
    times, last = [], None
    for _ in range(reps):
        elapsed, last = timed_run(cmd, cwd)
        times.append(elapsed)
    return statistics.median(times), last


def compile_time(path: Path, reps: int) -> None:
    from anthares44.automation.compiler.lint import lint_paths
    result = lint_paths([str(path)])
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        lint_paths([str(path)])
        times.append(time.perf_counter() - start)
    print(f"compile (lint_paths, 10-step workflow, in-process, {reps} reps): "
          f"median {statistics.median(times) * 1000:.2f} ms, p90 {sorted(times)[int(reps * 0.9)] * 1000:.2f} ms"
          f"  [{len(result.diagnostics)} diagnostics]")
    try:
        lint_paths([str(path)], lower=True)
    except TypeError:
        return
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        lint_paths([str(path)], lower=True)
        times.append(time.perf_counter() - start)
    print(f"compile to IR (lint_paths lower=True): median {statistics.median(times) * 1000:.2f} ms")


def throughput(directory: Path, count: int) -> float:
    elapsed, proc = median_run([A44, "automation", "lint", str(directory)], 3)
    summary = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "?"
    verdict = "OK" if elapsed < THOUSAND_FILES_TARGET_S * count / 1000 else "OVER TARGET"
    print(f"a44 automation lint DIR ({count} files, median of 3): {elapsed:.2f} s = "
          f"{count / elapsed:.0f} files/s  [exit {proc.returncode}; {summary}]  "
          f"target < {THOUSAND_FILES_TARGET_S * count / 1000:.1f} s: {verdict}")
    if proc.returncode != 0:
        print("  first findings:\n    " + "\n    ".join(proc.stdout.splitlines()[:5]))
    return elapsed


def jsonschema_comparison(directory: Path, count: int, lint_elapsed: float) -> None:
    schema = next((p for p in (ROOT / "schemas" / "any.json", ROOT / "schemas" / "any.schema.json")
                   if p.exists()), None)
    if schema is None:
        print("check-jsonschema: skipped (schemas/any.json is not there yet)")
        return
    if not CHECK_JSONSCHEMA:
        print("check-jsonschema: skipped (not installed; pip install check-jsonschema)")
        return
    files = sorted(str(p) for p in directory.glob("*.yaml"))
    elapsed, proc = median_run([CHECK_JSONSCHEMA, "--schemafile", str(schema), *files], 3)
    print(f"check-jsonschema --schemafile schemas/{schema.name} ({count} files, median of 3): {elapsed:.2f} s = "
          f"{count / elapsed:.0f} files/s  [exit {proc.returncode}]")
    print(f"  ratio a44 lint / check-jsonschema: {lint_elapsed / elapsed:.2f}x "
          f"(a44 also checks references, DAG, CEL, templates, SQL; schema validation checks shape only)")


def cold_start(one_file: Path) -> None:
    floor, _ = median_run([sys.executable, "-c", "pass"], 10)
    elapsed, proc = median_run([A44, "automation", "lint", str(one_file)], 10)
    verdict = "OK" if elapsed * 1000 < COLD_START_TARGET_MS else "OVER TARGET"
    print(f"cold start `a44 automation lint ONEFILE` (median of 10): {elapsed * 1000:.0f} ms "
          f"[exit {proc.returncode}]  target < {COLD_START_TARGET_MS} ms: {verdict}")
    print(f"  `python -c pass` (floor): {floor * 1000:.0f} ms; ratio {elapsed / floor:.1f}x; "
          f"a44 overhead {max(elapsed - floor, 0) * 1000:.0f} ms")


def heavy_imports(one_file: Path) -> None:
    code = ("import sys\n"
            "from anthares44.automation.cli.main import main\n"
            f"rc = main(['automation', 'lint', {str(one_file)!r}])\n"
            "print('MODULES', ' '.join(n for n in ('asyncpg', 'aiohttp') if n in sys.modules) or '-',"
            " file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    loaded = [l for l in proc.stderr.splitlines() if l.startswith("MODULES")]
    found = loaded[-1].split(" ", 1)[1] if loaded else "?"
    print(f"heavy modules after a lint run (asyncpg, aiohttp): "
          f"{'none' if found == '-' else found + '  <-- SHOULD NOT BE IMPORTED'}")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cum_us, name = line[len("import time:"):].split("|", 2)
        indent = len(name) - len(name.lstrip(" "))
        rows.append((indent, int(cum_us), name.strip()))
    top = min((r[0] for r in rows), default=0)
    rows = [(us, name) for indent, us, name in rows if indent == top]
    rows.sort(reverse=True)
    print("  slowest top-level imports (cumulative ms): " +
          ", ".join(f"{name} {us / 1000:.0f}" for us, name in rows[:8]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} CPUs; a44 = {A44}")
    with tempfile.TemporaryDirectory(prefix="a44-bench-") as tmp:
        tmp_path = Path(tmp)
        one = write_workflows(tmp_path / "one", 1)[0]
        write_workflows(tmp_path / "many", args.files)
        compile_time(one, args.reps)
        elapsed = throughput(tmp_path / "many", args.files)
        jsonschema_comparison(tmp_path / "many", args.files, elapsed)
        cold_start(one)
        heavy_imports(one)
    return 0


if __name__ == "__main__":
    sys.exit(main())
