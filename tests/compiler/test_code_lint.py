"""`a44 automation lint MODULE.py` lints a code workflow as `publish` checks it (issue 15 item 5), in a real
process: the golden output, not "YAML syntax error", and no __pycache__ left in the user's tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from golden_support import GOLDEN

A44 = shutil.which("a44", path=os.path.dirname(sys.executable)) or shutil.which("a44")


def test_console_script_lints_a_code_workflow(tmp_path):
    for case in ("A44803/A44803_bad_step_id", "A44805/A44805_bad_duration"):
        src = GOLDEN / f"{case}.py"
        shutil.copy(src, tmp_path / src.name)
        proc = subprocess.run([A44, "automation", "lint", src.name], cwd=tmp_path, capture_output=True, text=True,
                              timeout=60)
        assert (proc.returncode, proc.stdout) == (1, Path(f"{GOLDEN / case}.out").read_text()), proc.stderr
    assert not (tmp_path / "__pycache__").exists()
