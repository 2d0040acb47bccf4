"""The guide's worked example (docs/testkit.md) works as pasted: its files are written to an empty directory and
pytest runs its tests there, with nothing but the installed kit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "testkit.md"


def example_files() -> dict[str, str]:
    """The guide's code blocks whose first line names a file (`# workflows/x.yaml`): {path: text}."""
    files = {}
    for block in re.findall(r"```(?:yaml|python)\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S):
        first = block.split("\n", 1)[0]
        m = re.fullmatch(r"# ([\w./-]+\.(?:yaml|py))", first)
        if m:
            files[m.group(1)] = block
    return files


def test_the_worked_example_passes_as_written(tmp_path, a44_postgres):
    files = example_files()
    assert sorted(files) == ["tests/test_payments.py", "workflows/charge-order.yaml", "workflows/nightly.yaml",
                             "workflows/nightly_trigger.yaml"]
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    # the same server as this session's (its URL as A44_TEST_DATABASE_URL), so no second one starts
    env = {**os.environ, "A44_TEST_DATABASE_URL": a44_postgres.admin_url}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "tests/"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "3 passed" in proc.stdout
