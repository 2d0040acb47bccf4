"""Guard: mypy with pyproject's [tool.mypy] finds no error in the strict set (core, grammar, compiler, runtime.store:
the modules of the strict override) and no more errors in any other file than tests/mypy_baseline.txt allows, so
the types can only get better. A strict-set file still listed in the baseline's first section is one not clean yet:
its count too may only go down, and no other strict file may get an error. One mypy run for the session; its
incremental cache lives in .mypy_cache."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "mypy_baseline.txt"
HEADER = ("# mypy errors per file (tests/test_types.py): a count may only go down; a file not listed has none.\n"
          "# `python tests/test_types.py` rewrites it from a run.\n")
STRICT_PENDING = "# the strict set, not clean yet (each of these must reach 0 and leave the list):\n"
REST = "# outside the strict set:\n"
ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):\d+: error: ")


def strict_modules() -> list[str]:
    """The module patterns of pyproject's strict override (the one that turns on disallow_untyped_defs)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    (strict,) = [o for o in config["overrides"] if o.get("disallow_untyped_defs")]
    return strict["module"]


def is_strict(path: str, patterns: list[str]) -> bool:
    module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    for pattern in patterns:
        if pattern.endswith(".*"):
            if module == pattern[:-2] or module.startswith(pattern[:-1]):
                return True
        elif module == pattern:
            return True
    return False


def read_baseline() -> dict[str, int]:
    counts = {}
    for line in BASELINE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            count, path = line.split()
            counts[path] = int(count)
    return counts


def run_mypy() -> dict[str, list[str]]:
    """Each file's error lines from one run of mypy over the package."""
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if proc.returncode not in (0, 1):  # 2: mypy itself failed (bad config, crash), not a type error
        raise RuntimeError(f"mypy did not run (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    errors: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        if m := ERROR.match(line):
            errors.setdefault(m["path"], []).append(line)
    return errors


def _over_baseline(errors: dict[str, list[str]], strict: bool) -> tuple[list[str], list[str]]:
    """(files with more errors than the baseline allows, with their errors; files with fewer) of one side."""
    patterns, baseline = strict_modules(), read_baseline()
    worse, better = [], []
    for path in sorted(set(baseline) | set(errors)):
        if is_strict(path, patterns) != strict:
            continue
        now, allowed = len(errors.get(path, [])), baseline.get(path, 0)
        if now > allowed:
            worse += [f"{path}: {now} errors, baseline {allowed}", *errors[path]]
        elif now < allowed:
            better.append(f"{now} {path}" if now else f"(delete the line of {path})")
    return worse, better


def test_strict_set_clean_and_no_file_above_its_baseline():
    # one test, so that pytest-xdist runs mypy once (two workers would run it twice, on one cache)
    errors = run_mypy()
    worse, better = _over_baseline(errors, strict=True)
    assert not worse, "mypy errors in the strict set:\n" + "\n".join(worse)
    assert not better, ("fewer mypy errors in the strict set than tests/mypy_baseline.txt lists: lower it:\n"
                        + "\n".join(better))
    worse, better = _over_baseline(errors, strict=False)
    assert not worse, "more mypy errors than tests/mypy_baseline.txt allows:\n" + "\n".join(worse)
    assert not better, ("fewer mypy errors than tests/mypy_baseline.txt says: lower it (the baseline only shrinks):\n"
                        + "\n".join(better))


if __name__ == "__main__":
    # `python tests/test_types.py`: write today's counts (after a merge moved errors around; review the diff: a
    # file whose count went up has new errors to fix, not to baseline)
    errors, patterns = run_mypy(), strict_modules()
    rows = sorted((path, len(lines)) for path, lines in errors.items())
    pending = [f"{n} {path}\n" for path, n in rows if is_strict(path, patterns)]
    rest = [f"{n} {path}\n" for path, n in rows if not is_strict(path, patterns)]
    BASELINE.write_text(HEADER + (STRICT_PENDING + "".join(pending) if pending else "") + REST + "".join(rest))
    print(f"{sum(n for _, n in rows)} errors in {len(rows)} files ({len(pending)} of them in the strict set) -> "
          f"{BASELINE.relative_to(ROOT)}")
