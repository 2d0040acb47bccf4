"""The suite's own sleeps, counted (issue 27: "fewer sleeps in the suite, measured"): with A44_SLEEP_CENSUS=FILE,
every `asyncio.sleep` / `time.sleep` called from a file under tests/ adds the wall time it slept to its test, and
each worker appends its tests' totals to FILE as JSON lines ({"test", "seconds", "calls"}). The engine's own sleeps
(poll loops, backoffs) are not counted: they are the product's, and the virtual clock already drives them where a
test asks. Without the variable nothing is patched.

    A44_SLEEP_CENSUS=/tmp/sleeps.jsonl python -m pytest -q && python tests/sleep_census.py /tmp/sleeps.jsonl
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent) + os.sep
_CENSUS = os.environ.get("A44_SLEEP_CENSUS")
_current: list[str] = [""]
_totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])


def _from_tests() -> bool:
    """Whether the caller of the sleep (two frames up: the wrapper, then its caller) is a file under tests/."""
    frame = sys._getframe(2)
    return frame.f_code.co_filename.startswith(_TESTS) and not frame.f_code.co_filename.endswith("sleep_census.py")


def _count(began: float) -> None:
    entry = _totals[_current[0]]
    entry[0] += time.monotonic() - began
    entry[1] += 1


if _CENSUS:
    _asyncio_sleep, _time_sleep = asyncio.sleep, time.sleep

    async def _counted_asyncio_sleep(delay, result=None):
        if not delay or not _from_tests():
            return await _asyncio_sleep(delay, result)
        began = time.monotonic()
        try:
            return await _asyncio_sleep(delay, result)
        finally:
            _count(began)

    def _counted_time_sleep(secs):
        if not secs or not _from_tests():
            return _time_sleep(secs)
        began = time.monotonic()
        try:
            return _time_sleep(secs)
        finally:
            _count(began)

    asyncio.sleep = _counted_asyncio_sleep      # type: ignore[assignment]
    time.sleep = _counted_time_sleep            # type: ignore[assignment]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        _current[0] = item.nodeid
        yield
        _current[0] = ""

    def pytest_sessionfinish(session):
        with open(_CENSUS, "a") as out:
            for test, (seconds, calls) in _totals.items():
                if test:
                    out.write(json.dumps({"test": test, "seconds": round(seconds, 3), "calls": calls}) + "\n")


def report(path: str, top: int = 25) -> str:
    """The census's total, per directory, and its largest tests."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    total = sum(r["seconds"] for r in rows)
    by_dir: dict[str, float] = defaultdict(float)
    for r in rows:
        by_dir[r["test"].split("/")[1] if "/" in r["test"] else r["test"]] += r["seconds"]
    lines = [f"tests that slept: {len(rows)}; seconds slept by tests' own code: {total:.1f} "
             f"({sum(r['calls'] for r in rows)} calls)", "by directory:"]
    lines += [f"  {d:16s} {s:7.1f} s" for d, s in sorted(by_dir.items(), key=lambda kv: -kv[1])]
    lines.append(f"largest {top}:")
    lines += [f"  {r['seconds']:7.1f} s {r['calls']:5d}  {r['test']}"
              for r in sorted(rows, key=lambda r: -r["seconds"])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25))
