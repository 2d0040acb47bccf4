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


def run_demo(tmp_path: Path, plugin: bool, **extra: str) -> subprocess.CompletedProcess:
    env = e2e_env(tmp_path, database_url=None, plugin=plugin, **extra)
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


ACT2 = "act 2: the manual's invoice-settle exactly as written (expected: failed and compensated)"


def test_demo_with_the_payments_plugin(tmp_path):
    proc = run_demo(tmp_path, plugin=True)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "wf_hello v1 created" in out
    assert "a44-payments stand-in listening on http://127.0.0.1:" in out
    _check_hello(out)
    main, act2 = out.split(ACT2)
    # the main path: the manual's workflow with mark-paid's params, as v4, settles the invoice
    assert '+    params: ["{{ input.invoiceId }}"]' in main and "wf_invoice_settle v4 created" in main
    settled = re.search(r"^(run_[0-9A-Z]{26}) succeeded in ", main.split("invoice-settle:")[1], re.M)
    assert settled, main
    assert "failed" not in main.split("invoice-settle:")[1].replace("A44501", ""), main
    # act 2, labelled: the text as written, in its own project, fails at mark-paid and voids the authorization
    assert "wf_invoice_settle v3 created" in act2
    assert re.search(r"attempt\.finished\s+mark-paid #1 failed E_SQL", act2), act2
    assert "expected: failed and compensated; got: failed at mark-paid (E_SQL), reserve-funds compensated" in act2
    m = re.search(r"^act 2 as expected", act2, re.M)
    assert m, act2
    assert re.search(rf"^demo OK: invoice-settle run {settled.group(1)} succeeded; act 2 run run_[0-9A-Z]{{26}} "
                     r"failed and compensated, as expected$", act2, re.M), act2


def test_demo_fails_when_act_2_does_not_fail_and_compensate(tmp_path):
    """The script checks act 2, not only its state: with every authorization refused for good (a permanent 400),
    the as-written run still ends `failed`, but at reserve-funds with nothing to compensate, and the demo exits
    non-zero saying act 2 was not as expected (the settled main path fails too)."""
    from tests.e2e.support import StandIn

    env = e2e_env(tmp_path, database_url=None, plugin=True)
    standin = StandIn(env, tmp_path / "standin.log")
    try:
        standin.fail(path="/v1/authorizations", status=400, times=-1)
        proc = run_demo(tmp_path, plugin=True, A44_PAYMENTS_URL=standin.url)
    finally:
        standin.stop()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "act 2 NOT as expected" in proc.stderr and "demo FAILED" in proc.stderr, proc.stderr
    assert "got: failed at reserve-funds (E_UPSTREAM_400), reserve-funds NOT compensated" in proc.stdout, proc.stdout
    assert "demo OK" not in proc.stdout


def test_demo_without_the_plugin(tmp_path):
    proc = run_demo(tmp_path, plugin=False)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "wf_hello v1 created" in out and "skipping invoice-settle" in out
    _check_hello(out)
