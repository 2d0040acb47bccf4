"""`a44 automation publish | run | runs | logs` as a user types them: in-process through `cli.main` for the many
output and exit-code cases, and through the real `a44` console script (subprocesses, A44_DATABASE_URL = the test
database) for the end-to-end ones: the run id printed at once, `--wait` returning when the run ends, `logs
--follow` streaming a new attempt via NOTIFY."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from anthares44.automation.runtime.store.core import Store
from tests.cli_support import run_cli
from tests.runtime.test_api import OTHER, attempt, finish_run, set_running, write_workflow

A44 = shutil.which("a44", path=os.path.dirname(sys.executable)) or shutil.which("a44")


@pytest.fixture
def db(pg_url, monkeypatch):
    """The test database for in-process runs of the CLI (which connects through A44_DATABASE_URL)."""
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    monkeypatch.delenv("A44_PROJECT", raising=False)
    return pg_url


@pytest.fixture
def sys_store(pg_url, aio, tmp_path):
    """A store on the system clock, as the CLI uses: the tests write through it as a stand-in worker."""
    s = aio(Store.connect(pg_url, results_dir=tmp_path / "results"))
    aio(s.ensure_partitions())
    yield s
    aio(s.close())


def cli(capsys, *argv):
    return run_cli(capsys, "automation", *argv)


@pytest.fixture
def wf_file(tmp_path):
    return write_workflow(tmp_path / "wf")


@pytest.fixture
def published(db, capsys, wf_file):
    code, out, err = cli(capsys, "publish", wf_file)
    assert code == 0, err
    return "wf_demo_pass"


# --- publish ---------------------------------------------------------------------------------------------------
def test_publish_prints_created_then_unchanged(db, capsys, wf_file):
    code, out, err = cli(capsys, "publish", wf_file)
    assert (code, out) == (0, "wf_demo_pass v1 created\n")
    assert "1 created in project pj_default" in err
    code, out, _ = cli(capsys, "publish", wf_file)
    assert (code, out) == (0, "wf_demo_pass v1 unchanged\n")


def test_publishing_a_queue_file_says_what_it_did(db, capsys, tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text("- id: q_mail\n  maxConcurrency: 5\n")
    code, out, err = cli(capsys, "publish", str(path))
    assert (code, out) == (0, "q_mail (queue) created\n")
    assert "1 queue in project pj_default" in err
    path.write_text("- id: q_mail\n  maxConcurrency: 6\n")
    assert cli(capsys, "publish", str(path))[1] == "q_mail (queue) updated\n"


def test_publish_refusal_prints_reason_and_hint_and_exits_1(db, capsys, wf_file, tmp_path):
    cli(capsys, "publish", wf_file)
    changed = write_workflow(tmp_path / "changed", second="renamed")
    code, out, _ = cli(capsys, "publish", changed)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "wf_demo_pass v1 refused"
    assert lines[1].startswith("  E_VERSION_CONFLICT wf_demo_pass version 1 is already published with different steps")
    assert lines[2].startswith("  hint: increment `version:` (to 2)")


def test_publish_compile_errors_use_the_lint_text_format(db, capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nversion: 1\nsteps:\n  - id: a\n    uses: pass\n  - id: b\n    uses: pass\n")
    code, out, err = cli(capsys, "publish", str(bad))
    assert code == 1
    errors = [line for line in out.splitlines() if ": error A44" in line]
    assert len(errors) == 2 and all(line.startswith(f"{bad}:") for line in errors)  # every problem, not the first
    assert "publish refused: 2 errors in 1 file; nothing was stored" in err


def test_publish_json(db, capsys, wf_file):
    code, out, _ = cli(capsys, "publish", wf_file, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] and doc["project"] == "pj_default"
    assert [(w["workflow_id"], w["version"], w["outcome"]) for w in doc["workflows"]] == [
        ("wf_demo_pass", 1, "created")]
    assert doc["diagnostics"] == []


# --- run -------------------------------------------------------------------------------------------------------
def test_run_prints_created_then_deduplicated_with_key_age(published, capsys):
    args = ("run", published, "--input", '{"customer":"inv_8812"}',
            "--idempotency-key", "manual-inv_8812-2026-07-19")
    code, out, _ = cli(capsys, *args)
    assert code == 0 and out.endswith(" created\n") and out.startswith("run_")
    run_id = out.split()[0]
    code, again, _ = cli(capsys, *args)
    assert code == 0 and again.startswith(f"{run_id} deduplicated (key age ") and again.endswith("s)\n")
    code, listed, _ = cli(capsys, "runs")
    assert listed.startswith("total: 1\n")


def test_run_without_key_is_a_usage_error_that_says_why(db, capsys):
    code, out, err = cli(capsys, "run", "wf_demo_pass", "--input", "{}")
    assert code == 2 and out == ""
    assert err.startswith("E_IDEMPOTENCY_KEY_REQUIRED a manual run needs an idempotency key")
    assert "duplicate" in err and "hint: pass --idempotency-key" in err


@pytest.mark.parametrize("text, message", [("{bad", "--input is not valid JSON"),
                                           ("[1, 2]", "--input must be a JSON object")])
def test_run_bad_input_is_a_usage_error(db, capsys, text, message):
    code, _, err = cli(capsys, "run", "wf_demo_pass", "--input", text, "--idempotency-key", "k")
    assert code == 2 and message in err and "Traceback" not in err


def test_run_input_from_file(published, capsys, tmp_path):
    payload = tmp_path / "in.json"
    payload.write_text('{"customer": "from-file"}')
    code, out, _ = cli(capsys, "run", "demo-pass", "--input", f"@{payload}", "-k", "k", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["created"] and doc["workflow_id"] == "wf_demo_pass" and doc["version"] == 1
    code, out, _ = cli(capsys, "logs", doc["run_id"], "--format", "json")
    assert json.loads(out)["run"]["input"] == {"customer": "from-file"}


def test_run_unknown_workflow_is_a_coded_error(db, capsys):
    code, out, err = cli(capsys, "run", "wf_nope", "-k", "k")
    assert code == 1 and err.startswith("E_WORKFLOW_NOT_FOUND no version of wf_nope is published in pj_default")


def test_run_wait_timeout_exits_124(published, capsys):
    code, out, _ = cli(capsys, "run", published, "-i", '{"customer":"c"}', "-k", "k", "--wait", "--timeout", "300ms")
    assert code == 124
    first, second = out.splitlines()
    assert first.endswith(" created") and " still pending after 300ms" in second


def test_timeout_needs_wait(db, capsys):
    code, _, err = cli(capsys, "run", "wf_x", "-k", "k", "--timeout", "5s")
    assert code == 2 and "--timeout only applies with --wait" in err


# --- runs ------------------------------------------------------------------------------------------------------
def test_runs_table_filters_and_json(published, capsys, sys_store, aio, tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "other.yaml").write_text(OTHER)
    cli(capsys, "publish", str(tmp_path / "o"))
    ids = {}
    for key in ("ok", "bad", "comp"):
        _, out, _ = cli(capsys, "run", published, "-i", '{"customer":"c"}', "-k", key)
        ids[key] = out.split()[0]
    cli(capsys, "run", "other-flow", "-k", "other")
    aio(attempt(sys_store, ids["bad"], "second", 1, "failed", "E_UPSTREAM_503"))
    aio(finish_run(sys_store, ids["bad"], "failed", failed_step="second", error_code="E_UPSTREAM_503"))
    aio(finish_run(sys_store, ids["comp"], "compensation_failed", failed_step="first",
                   error_code="E_COMPENSATION_FAILED"))

    code, out, _ = cli(capsys, "runs", "--state", "failed", "--step", "second", "--since", "48h")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "total: 1"
    assert lines[1].split() == ["RUN", "WORKFLOW", "VER", "STATE", "STEP", "ERROR", "ROWS", "IN/OUT/ERR", "CREATED",
                                "DURATION"]
    assert lines[2].split()[:6] == [ids["bad"], "wf_demo_pass", "1", "failed", "second", "E_UPSTREAM_503"]
    code, out, _ = cli(capsys, "runs", "--state", "compensation_failed")
    assert out.startswith("total: 1\n") and ids["comp"] in out
    code, out, _ = cli(capsys, "runs", "--workflow", "demo-pass", "--limit", "1")
    assert out.startswith("total: 3\n") and "(1 of 3 shown; --limit N for more)" in out
    code, out, _ = cli(capsys, "runs", "--format", "json")
    doc = json.loads(out)
    assert list(doc) == ["total", "runs"] and doc["total"] == 4
    assert {"run_id", "workflow_id", "version", "state", "failed_step", "error_code", "created_at",
            "duration_ms"} <= set(doc["runs"][0])
    assert doc["runs"][0]["created_at"].endswith("Z")
    code, out, _ = cli(capsys, "runs", "--since", "1h", "--project", "pj_elsewhere")
    assert out == "total: 0\n"


def test_runs_unknown_state_suggests_and_exits_2(db, capsys):
    code, out, err = cli(capsys, "runs", "--state", "compensation_faild")
    assert code == 2 and out == ""
    assert err.splitlines()[0] == "E_INVALID_ARGUMENT unknown run state 'compensation_faild'"
    assert "did you mean 'compensation_failed'?" in err


def test_runs_bad_since_exits_2(db, capsys):
    code, _, err = cli(capsys, "runs", "--since", "yesterday")
    assert code == 2 and "'yesterday' is not a duration" in err


# --- logs ------------------------------------------------------------------------------------------------------
def test_logs_table_and_json(published, capsys, sys_store, aio):
    _, out, _ = cli(capsys, "run", published, "-i", '{"customer":"c"}', "-k", "k")
    run_id = out.split()[0]
    aio(attempt(sys_store, run_id, "first", 1, "failed", "E_UPSTREAM_503", seconds=0.12))
    aio(attempt(sys_store, run_id, "first", 2, "succeeded", seconds=0.05))
    code, out, _ = cli(capsys, "logs", run_id)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [run_id, "wf_demo_pass", "v1", "pending"]
    assert lines[1].split() == ["STEP", "ATTEMPT", "KIND", "STATUS", "ERROR", "DURATION", "STARTED"]
    assert lines[2].split()[:6] == ["first", "1", "action", "failed", "E_UPSTREAM_503", "120ms"]
    assert lines[3].split()[:6] == ["first", "2", "action", "succeeded", "-", "50ms"]
    code, out, _ = cli(capsys, "logs", run_id, "--format", "json")
    doc = json.loads(out)
    assert [a["status"] for a in doc["attempts"]] == ["failed", "succeeded"] and doc["run"]["run_id"] == run_id


def test_logs_of_an_unknown_run(db, capsys):
    code, _, err = cli(capsys, "logs", "run_01J9XQ")
    assert code == 1 and err.startswith("E_RUN_NOT_FOUND no run run_01J9XQ in pj_default")


def test_database_errors_are_one_coded_line(monkeypatch, capsys):
    from anthares44.automation.runtime.postgres.embedded import free_port

    monkeypatch.setenv("A44_DATABASE_URL", f"postgresql://a44:pw@127.0.0.1:{free_port()}/a44")
    code, _, err = cli(capsys, "runs")
    assert code == 1 and err.startswith("E_DB_UNAVAILABLE cannot reach PostgreSQL") and "Traceback" not in err
    assert "a44:***@" in err  # the password is not printed


# --- the real console script -----------------------------------------------------------------------------------
def a44_env(pg_url):
    env = {k: v for k, v in os.environ.items() if k not in ("A44_PROJECT",)}
    env["A44_DATABASE_URL"] = pg_url
    return env


def test_console_script_publish_run_and_wait(pg_url, sys_store, aio, wf_file):
    env = a44_env(pg_url)
    pub = subprocess.run([A44, "automation", "publish", wf_file], env=env, capture_output=True, text=True,
                         timeout=60)
    assert pub.returncode == 0 and pub.stdout == "wf_demo_pass v1 created\n", pub.stderr
    proc = subprocess.Popen([A44, "automation", "run", "wf_demo_pass", "--input", '{"customer":"inv_8812"}',
                             "--idempotency-key", "manual-inv_8812-2026-07-19", "--wait", "--timeout", "60s"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()  # printed at once, before the run ends
        assert first.startswith("run_") and first.endswith(" created\n"), proc.stderr.read()
        run_id = first.split()[0]
        time.sleep(0.3)
        assert proc.poll() is None  # still waiting: the run has not ended
        aio(finish_run(sys_store, run_id, "failed", failed_step="first", error_code="E_UPSTREAM_503",
                       error_message="payments API answered 503"))
        rest, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert rest.startswith(f"{run_id} failed at step first: E_UPSTREAM_503 payments API answered 503")


def test_console_script_logs_follow_streams_json_lines(pg_url, sys_store, aio, wf_file):
    env = a44_env(pg_url)
    subprocess.run([A44, "automation", "publish", wf_file], env=env, capture_output=True, timeout=60, check=True)
    out = subprocess.run([A44, "automation", "run", "demo-pass", "-i", '{"customer":"c"}', "-k", "k"], env=env,
                         capture_output=True, text=True, timeout=60)
    run_id = out.stdout.split()[0]
    proc = subprocess.Popen([A44, "automation", "logs", run_id, "--follow", "--format", "json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        created = json.loads(proc.stdout.readline())
        assert created["kind"] == "run.created" and created["run_id"] == run_id
        aio(set_running(sys_store, run_id, "first"))
        t0 = time.monotonic()
        aio(attempt(sys_store, run_id, "first", 1, "succeeded"))
        started = json.loads(proc.stdout.readline())
        finished = json.loads(proc.stdout.readline())
        assert time.monotonic() - t0 < 2.5  # NOTIFY, not the 5 s safety re-check
        assert (started["kind"], finished["kind"], finished["status"]) == (
            "attempt.started", "attempt.finished", "succeeded")
        assert finished["data"]["duration_ms"] == 120
        aio(finish_run(sys_store, run_id, "succeeded"))
        rest, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert [json.loads(line)["kind"] for line in rest.splitlines()] == ["run.state"]


def test_console_script_logs_follow_text(pg_url, sys_store, aio, wf_file):
    env = a44_env(pg_url)
    subprocess.run([A44, "automation", "publish", wf_file], env=env, capture_output=True, timeout=60, check=True)
    run_id = subprocess.run([A44, "automation", "run", "demo-pass", "-i", '{"customer":"c"}', "-k", "k"], env=env,
                            capture_output=True, text=True, timeout=60).stdout.split()[0]
    aio(attempt(sys_store, run_id, "first", 1, "failed", "E_UPSTREAM_503"))
    aio(finish_run(sys_store, run_id, "failed", failed_step="first", error_code="E_UPSTREAM_503"))
    done = subprocess.run([A44, "automation", "logs", run_id, "--follow"], env=env, capture_output=True, text=True,
                          timeout=30)
    kinds = [line.split()[1] for line in done.stdout.splitlines()]
    assert done.returncode == 0 and kinds == ["run.created", "attempt.started", "attempt.finished", "run.state"]
    assert "first #1 failed E_UPSTREAM_503 (120ms)" in done.stdout
    assert done.stdout.splitlines()[-1].endswith("run.state         failed first E_UPSTREAM_503")


def test_console_script_run_wait_with_the_real_engine(pg_url, sys_store, aio, wf_file):
    from anthares44.automation.runtime.engine import Engine

    env = a44_env(pg_url)
    subprocess.run([A44, "automation", "publish", wf_file], env=env, capture_output=True, timeout=60, check=True)
    proc = subprocess.Popen([A44, "automation", "run", "demo-pass", "-i", '{"customer":"c"}', "-k", "engine",
                             "--wait", "--timeout", "60s"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        run_id = proc.stdout.readline().split()[0]
        aio(Engine(sys_store).drive())  # the interpreter, in this process, on the same database
        rest, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert rest.startswith(f"{run_id} succeeded in ")
    logs = subprocess.run([A44, "automation", "logs", run_id], env=env, capture_output=True, text=True, timeout=60)
    assert [line.split()[:4] for line in logs.stdout.splitlines()[2:]] == [
        ["first", "1", "action", "succeeded"], ["second", "1", "action", "succeeded"]]


def test_runs_resolve_settles_a_parked_exclusive_step(published, capsys, sys_store, aio):
    _, out, _ = cli(capsys, "run", published, "-i", '{"customer":"c"}', "-k", "parked")
    run_id = out.split()[0]

    async def park():  # stand-in for the interpreter: the lease of exclusive step `first` expired
        async with sys_store.connection("test_park") as conn, conn.transaction():
            await conn.execute("update automation.runs set state = 'awaiting_confirmation', current_step = 'first', "
                               "next_wake_at = null where run_id = $1", run_id)

    aio(park())
    code, out, err = cli(capsys, "runs", "--state", "awaiting_confirmation")
    assert out.startswith("total: 1\n") and run_id in out
    code, out, err = cli(capsys, "runs", "resolve", run_id, "--step", "first", "--outcome", "retry", "--by", "ana")
    assert (code, out) == (0, f"{run_id} step first resolved as retry; run is pending\n"), err
    events = aio(sys_store.list_run_events(run_id))
    assert events[-1]["data"] == {"from": "awaiting_confirmation", "outcome": "retry", "by": "ana"}
    code, out, err = cli(capsys, "runs", "resolve", run_id, "--step", "first", "--outcome", "retry")
    assert code == 1 and "only a run in awaiting_confirmation on step first can be resolved" in err
    code, _, err = cli(capsys, "runs", "resolve", run_id, "--step", "first", "--outcome", "maybe")
    assert code == 2 and "invalid choice" in err
