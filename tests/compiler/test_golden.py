"""Golden tests of `a44 automation lint` (actionlint style).

Each case under `tests/compiler/golden/<code>/` is linted through the real CLI entry point
(`anthares44.automation.cli.main.main`, in-process; one subprocess smoke test runs the console script) and
its stdout is compared with `<case>.out` byte for byte. See `golden_support.py` for the layout:
`<case>.yaml` (linted with its directory as cwd), `<case>/` (a directory, linted as `.`), or a generated
input (`GENERATORS`: a file over the size limit, a missing path).

To accept new output after an intended change, rewrite the `.out` files (and docs/diagnostics.md) with

    A44_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -n 0 tests/compiler/test_golden.py tests/compiler/test_codes.py

and review the diff.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from golden_support import GOLDEN, UPDATE_ENV, all_cases, codes_in, lint_argv, run_case

CASES = all_cases()
UPDATE = os.environ.get(UPDATE_ENV) == "1"


def test_there_are_golden_cases():
    assert len(CASES) >= 100
    assert sum(c.passing for c in CASES) >= 50


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_golden(case):
    assert case.kind != "orphan", f"{case.out} has no input: add {case.name}.yaml, a {case.name}/ directory " \
                                  f"or a generator in golden_support.GENERATORS"
    out, code = run_case(case)
    if UPDATE:
        case.out.write_text(out, encoding="utf-8")
    assert case.out.exists(), f"missing {case.out}; run with {UPDATE_ENV}=1 to create it"
    assert out == case.expected(), f"lint output of {case.id} differs from {case.out.name}"
    # the exit code follows the findings: errors fail, warnings alone pass
    has_error = any(line.split(": ", 2)[1].startswith("error ") for line in out.splitlines()
                    if not line.startswith("  "))
    assert code == (1 if has_error else 0)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case_demonstrates_its_code(case):
    """A passing case prints nothing; a failing case prints at least its own code."""
    if case.passing:
        assert case.expected() == "", f"{case.id} is named as passing but has findings"
    else:
        assert case.code is not None, f"failing case {case.id} must be named <code>_<what>"
        assert case.code in codes_in(case.expected()), f"{case.id} does not produce {case.code}"
    if case.code is not None:
        assert case.out.parent.name == case.code, f"{case.id} sits in the wrong directory"


def _console_script() -> list[str]:
    exe = Path(sys.executable).with_name("a44")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("a44")
    return [found] if found else [sys.executable, "-m", "anthares44.automation.cli.main"]


def test_smoke_through_the_console_script(tmp_path):
    """One real process: what users and CI run prints exactly the golden output (no color when piped)."""
    case = next(c for c in CASES if c.id == "A44201/A44201_missing_timeout")
    cwd, args = lint_argv(case)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    proc = subprocess.run([*_console_script(), "automation", "lint", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.stdout == case.expected()
    assert proc.returncode == 1
    assert "1 error, 0 warnings in 1 file" in proc.stderr


def test_directory_cases_lint_every_file_together():
    """Cross-file codes only appear when the files are linted together: each file alone is clean of them."""
    from golden_support import run_lint

    case = next(c for c in CASES if c.id == "A44601/A44601_duplicate_trigger_id")
    for name in ("a.yaml", "b.yaml"):
        out, _err, _code = run_lint(case.dir, [name, "workflow.yaml"])
        assert "A44601" not in out
    assert "A44601" in case.expected()


def test_golden_tree_has_no_stray_files():
    """Everything under golden/ belongs to a case, so a misnamed file cannot silently stop being tested."""
    known = set()
    for c in CASES:
        known.add(c.out)
        if c.yaml:
            known.add(c.yaml)
        if c.dir:
            known.update(c.dir.rglob("*"))
            known.add(c.dir)
    stray = [p for p in GOLDEN.rglob("*") if p.is_file() and p not in known]
    assert not stray, stray
