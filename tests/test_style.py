"""Guard: the code passes ruff with the rules of pyproject's [tool.ruff] (imports sorted, no unused or undefined
names, bugbear, pyupgrade to 3.11), so CI fails on a regression instead of a reviewer finding it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed: pip install -e '.[test]'")
    proc = subprocess.run([ruff, "check", "--no-cache", "anthares44", "tests", "bench", "scripts"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
