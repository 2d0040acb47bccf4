"""Where a daemon's CPU goes (helper of bench_runtime.py --profile): py-spy samples a running daemon and the
samples are summed by area (the leaf frame's package) and by a44 function (inclusive), so a figure in the table
comes with the profile that explains it.

    Profiler(pid, Path("http-x1-0.txt")) ... .stop() -> printable summary
    python bench/runtime_profile.py FILE          # the summary of a file recorded earlier
"""

from __future__ import annotations

import collections
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

RATE = 250      # samples/s: enough for a few thousand samples per figure, cheap beside the daemon's own CPU

# the leaf frame's file -> the area its CPU is charged to (first match wins)
AREAS = [
    ("asyncpg", "asyncpg (driver: encode, decode, protocol)"),
    ("aiohttp", "aiohttp (HTTP client)"), ("yarl", "aiohttp (HTTP client)"), ("multidict", "aiohttp (HTTP client)"),
    ("jinja2", "jinja2 (templates)"), ("pydantic", "pydantic"),
    ("/json/", "json (encode, decode)"),
    ("asyncio", "asyncio (event loop, tasks, futures)"), ("selectors", "asyncio (event loop, tasks, futures)"),
    ("socket", "asyncio (event loop, tasks, futures)"), ("ssl", "asyncio (event loop, tasks, futures)"),
    ("automation/runtime/engine/", "a44 engine"), ("automation/runtime/", "a44 runtime (store, render, results)"),
    ("automation/stdlib_connectors/", "a44 connectors"), ("automation/grammar/", "a44 expressions (CEL)"),
    ("automation/", "a44 other"), ("logging", "logging"),
]
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


class Profiler:
    """py-spy recording one process until `stop()`; nothing (and a one-line note) when py-spy is missing."""

    def __init__(self, pid: int, out: Path):
        self.out = out
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.proc = None
        if Path(exe).exists():
            self.proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw",
                                          "--nonblocking", "--output", str(out)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> str:
        if self.proc is None:
            return "    (profile: py-spy is not installed: pip install py-spy)"
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        return summarize(self.out) if self.out.exists() else f"    (profile: py-spy wrote nothing to {self.out})"


def _frames(stack: str) -> list[tuple[str, str]]:
    out = []
    for part in stack.split(";"):
        m = FRAME.match(part.strip())
        out.append((m["func"], m["file"]) if m else (part.strip(), ""))
    return out


def _area(path: str) -> str:
    for needle, area in AREAS:
        if needle in path:
            return area
    return "other (C extensions, interpreter)"


def summarize(path: Path, top: int = 12) -> str:
    areas: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = _frames(stack)
        total += n
        areas[_area(frames[-1][1])] += n
        seen = set()
        for func, file in frames:
            if file.startswith("automation/") and not file.startswith("automation/cli/"):
                key = f"{file.removeprefix('automation/')}:{func}"
                if key not in seen:
                    seen.add(key)
                    inclusive[key] += n
    if not total:
        return f"    (profile {path.name}: no samples)"
    lines = [f"    profile {path.name}: {total} samples at {RATE}/s of the daemon's busy time; by area (leaf frame):"]
    lines += [f"      {100 * n / total:5.1f}%  {a}" for a, n in areas.most_common()]
    lines.append(f"    a44 functions, inclusive (top {top}):")
    lines += [f"      {100 * n / total:5.1f}%  {k}" for k, n in inclusive.most_common(top)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarize(Path(sys.argv[1])))
