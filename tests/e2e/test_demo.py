"""examples/demo.sh, the README's main job, as a user runs it: a fresh $A44_HOME (so the embedded PostgreSQL is
initialised and started by the script, and stopped by it), the package installed in this environment, and the
example plugin installed as a real distribution (dist-info + src on PYTHONPATH) for the second case."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from tests.e2e.support import EXAMPLES, e2e_env

DEMO = EXAMPLES / "demo.sh"


def run_demo(tmp_path: Path, plugin: bool) -> subprocess.CompletedProcess:
    env = e2e_env(tmp_path, database_url=None, plugin=plugin)
    # The embedded server's data dir must be reachable by the `postgres` user when tests run as root, and pytest's
    # basetemp is 0700: use a world-traversable temp dir for A44_HOME (as tests/runtime/pg.py does).
    home = Path(tempfile.mkdtemp(prefix="a44-demo-home-"))
    env["A44_HOME"] = str(home)
    try:
        proc = subprocess.run(["bash", str(DEMO)], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=240)
        status = subprocess.run([env["PATH"].split(os.pathsep)[0] + "/a44", "automation", "db", "status"], env=env,
                                capture_output=True, text=True, timeout=60)
        assert status.returncode == 3, ("the demo left the embedded server running", status.stdout)
        return proc
    finally:
        subprocess.run([env["PATH"].split(os.pathsep)[0] + "/a44", "automation", "db", "stop"], env=env,
                       capture_output=True, timeout=60)
        subprocess.run(["rm", "-rf", str(home)], timeout=60)


def _check_hello(out: str) -> str:
    m = re.search(r"^(run_[0-9A-Z]{26}) created$", out, re.M)
    assert m, out
    run_id = m.group(1)
    assert re.search(rf"^{run_id} succeeded in ", out, re.M), out
    assert re.search(rf"^{run_id}\s+wf_hello v1\s+succeeded", out, re.M), out          # logs header
    for step in ("greet", "pause", "goodbye"):
        assert re.search(rf"^{step}\s+1\s+\S+\s+succeeded", out, re.M), (step, out)
    assert re.search(rf"^{run_id} deduplicated \(key age [0-9.]+s\)$", out, re.M), out
    assert f"demo OK: run {run_id} succeeded" in out
    return run_id


def test_demo_with_the_payments_plugin(tmp_path):
    proc = run_demo(tmp_path, plugin=True)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "wf_hello v1 created" in out and "wf_invoice_settle v3 created" in out
    assert "a44-payments stand-in listening on http://127.0.0.1:" in out
    _check_hello(out)
    assert re.search(r"attempt\.finished\s+mark-paid #1 failed E_SQL", out), out
    assert "invoice-settle as written ended: failed" in out


def test_demo_without_the_plugin(tmp_path):
    proc = run_demo(tmp_path, plugin=False)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "wf_hello v1 created" in out and "skipping invoice-settle" in out
    _check_hello(out)
