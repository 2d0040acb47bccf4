"""The CLI against a remote daemon (docs/cli.md "Remote mode"): a real HTTP server on 127.0.0.1 over the test
database, tokens made in it, `a44 auth login`, then the real `a44` console script in subprocesses with no database
URL at all: publish, run --wait (the engine driven in-process), runs, logs, logs --follow, events publish; the
same output as the local path on the same data; 401 / 403 refused with a coded line and a hint."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from anthares44.automation.runtime.ingestion.tokens import create_token
from tests.runtime.pg import query
from tests.runtime.test_api import write_workflow

from .support import LiveServer, P, write_project

A44 = str(Path(sys.executable).parent / "a44")
_CLEAR = ("A44_DATABASE_URL", "A44_API_URL", "A44_API_TOKEN", "A44_PROJECT")


def a44(env, *args, input=None, check=True):
    p = subprocess.run([A44, *args], env=env, capture_output=True, text=True, timeout=60, input=input)
    if check:
        assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


@pytest.fixture
def live(pg_url, tmp_path):
    server = LiveServer(pg_url, results_dir=tmp_path / "results")
    yield server
    server.close()


def _token(live, scopes, name="cli"):
    return live.call(create_token, P, name, scopes, timedelta(days=1)).token


def _env(tmp_path, home="home", **extra):
    env = {k: v for k, v in os.environ.items() if k not in _CLEAR}
    env["A44_HOME"] = str(tmp_path / home)
    env.update(extra)
    return env


def _drive(live):
    """The interpreter, in this process, on the server's store: every due run to its end."""
    from anthares44.automation.runtime.engine import Engine

    live.run(Engine(live.store).drive())


def test_remote_cli_end_to_end_and_identical_to_local(live, pg_url, tmp_path):
    token = _token(live, ["automation:write"])
    remote = _env(tmp_path)
    local = _env(tmp_path, home="local-home", A44_DATABASE_URL=pg_url, A44_PROJECT=P)
    # login, token from stdin: 0600, url + project + token stored, status names the token but never prints it
    out = a44(remote, "auth", "login", "--project", P, "--url", live.url + "/", "--token-stdin", input=token + "\n")
    cred = Path(remote["A44_HOME"]) / "credentials"
    assert stat.S_IMODE(cred.stat().st_mode) == 0o600
    assert json.loads(cred.read_text())["projects"][P] | {"saved_at": None} == {
        "url": live.url, "token": token, "saved_at": None, "default": True}
    assert token not in out.stdout + out.stderr
    status = a44(remote, "auth", "status")
    assert token not in status.stdout + status.stderr
    assert "cli" in status.stdout and "automation:write" in status.stdout and live.url in status.stdout
    doc = json.loads(a44(remote, "auth", "status", "--format", "json").stdout)
    assert doc["logins"][0]["token"]["scopes"] == ["automation:write"] and doc["logins"][0]["ok"]
    assert doc["target"].startswith(f"remote {live.url} (project {P}")  # a login selects its project and server
    assert "(selected)" in status.stdout

    # publish: the files' text is uploaded; the report names the local files
    proj = write_project(tmp_path / "proj")[0]
    wf = write_workflow(tmp_path / "wf")
    pub = a44(remote, "automation", "publish", proj, wf, "--remote", "--verbose")
    assert f"a44: target: remote {live.url} (project {P}" in pub.stderr
    assert "wf_demo_pass v1 created" in pub.stdout and "trg_refund_large (event trigger, standalone) created" \
        in pub.stdout
    assert f"in project {P}" in pub.stderr
    same = [a44(env, "automation", "publish", proj, wf, "--format", "json", *flag).stdout
            for env, flag in ((remote, ("--remote",)), (local, ()))]
    assert same[0] == same[1] and json.loads(same[0])["files"][-1] == wf

    # run --wait: printed at once, then waits (server-sent events) until the engine ends the run
    proc = subprocess.Popen([A44, "automation", "run", "demo-pass", "-i", '{"customer":"c1"}', "-k", "remote-1",
                             "--wait", "--timeout", "60s", "--remote"], env=remote, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith("run_") and first.endswith(" created\n"), proc.stderr.read()
        run_id = first.split()[0]
        _drive(live)
        rest, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert rest.startswith(f"{run_id} succeeded in ")
    again = a44(remote, "automation", "run", "demo-pass", "-i", '{"customer":"c1"}', "-k", "remote-1", "--remote")
    assert again.stdout.startswith(f"{run_id} deduplicated (key age ")

    # events publish through the API: the bus delivers to the subscribed triggers
    ev = a44(remote, "automation", "events", "publish", "--type", "billing.refund.requested", "--data",
             '{"amountCents": 900000, "currency": "BRL"}', "--idempotency-key", "refund:remote:1",
             "--partition-key", "cust_1", "--remote").stdout
    assert "billing.refund.requested  created" in ev and "trg_refund_large  created run_" in ev
    _drive(live)

    # runs, logs, logs --follow: the same bytes as the local path, text and JSON
    for args in (("runs",), ("runs", "--format", "json"), ("runs", "--state", "succeeded", "--limit", "1"),
                 ("logs", run_id), ("logs", run_id, "--format", "json"), ("logs", run_id, "--follow"),
                 ("logs", run_id, "--follow", "--format", "json"), ("events", "list", "--format", "json")):
        r = a44(remote, "automation", *args, "--remote")
        loc = a44(local, "automation", *args)
        assert r.stdout == loc.stdout, args
    runs = json.loads(a44(remote, "automation", "runs", "--format", "json", "--remote").stdout)
    assert runs["total"] == 3 and {r["state"] for r in runs["runs"]} == {"succeeded"}
    logs = a44(remote, "automation", "logs", run_id, "--remote").stdout.splitlines()
    assert [line.split()[:4] for line in logs[2:]] == [["first", "1", "action", "succeeded"],
                                                       ["second", "1", "action", "succeeded"]]
    follow = a44(remote, "automation", "logs", run_id, "--follow", "--format", "json", "--remote").stdout
    assert [json.loads(x)["kind"] for x in follow.splitlines()][0] == "run.created"

    # the same coded errors as locally
    for args in (("logs", "run_nope"), ("runs", "--state", "faild"), ("run", "wf_nope", "-k", "x")):
        r = a44(remote, "automation", *args, "--remote", check=False)
        loc = a44(local, "automation", *args, check=False)
        assert (r.returncode, r.stderr) == (loc.returncode, loc.stderr), args

    # logout forgets it; --remote then says how to log in
    a44(remote, "auth", "logout", "--project", P)
    gone = a44(remote, "automation", "runs", "--remote", check=False)
    assert gone.returncode == 1 and gone.stderr.startswith("E_NOT_LOGGED_IN")
    assert "a44 auth login --project" in gone.stderr


def test_read_only_token_is_refused_for_run(live, tmp_path):
    env = _env(tmp_path)
    a44(env, "auth", "login", "--project", P, "--url", live.url, "--token", _token(live, ["automation:read"]),
        "--default")
    assert a44(env, "automation", "runs", "--verbose").stderr.startswith(f"a44: target: remote {live.url}")
    refused = a44(env, "automation", "run", "demo-pass", "-k", "k1", check=False)
    assert refused.returncode == 1
    lines = refused.stderr.splitlines()
    # the login redirected the verb: it says where it went before anything else
    assert lines[0].startswith(f"a44: target: remote {live.url} (project {P};") and "a44 auth login" in lines[0]
    assert lines[1] == "E_FORBIDDEN this API token lacks the automation:write scope"
    assert lines[2].startswith("hint: ") and "automation:write" in lines[2] and "a44 auth login" in lines[2]
    assert refused.stdout == ""


def test_wrong_token_is_401_and_never_printed(live, tmp_path):
    env = _env(tmp_path)
    bad = "a44_pat_" + "x" * 43
    a44(env, "auth", "login", "--project", P, "--url", live.url, "--token", "-", input=bad + "\n")
    r = a44(env, "automation", "runs", "--remote", check=False)
    assert r.returncode == 1
    assert r.stderr.splitlines()[0] == "E_TOKEN_INVALID unknown API token"
    assert "a44 auth login --project" in r.stderr
    status = a44(env, "auth", "status", check=False)
    assert status.returncode == 1 and "E_TOKEN_INVALID" in status.stdout
    assert bad not in status.stdout + status.stderr + r.stdout + r.stderr
    # a good token, but of another project than the one asked for: refused, not silently used
    other = _env(tmp_path, home="other", A44_API_TOKEN=_token(live, ["automation:write"]))
    mixed = a44(other, "automation", "runs", "--api-url", live.url, "--project", "pj_other", check=False)
    assert mixed.returncode == 1 and mixed.stderr.startswith(f"E_FORBIDDEN this API token belongs to {P}")


def test_unreachable_server_is_a_coded_line(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = _env(tmp_path, A44_API_URL=f"http://127.0.0.1:{port}", A44_API_TOKEN="a44_pat_x")
    r = a44(env, "automation", "runs", check=False)
    assert r.returncode == 1 and r.stderr.startswith(f"E_API_UNAVAILABLE cannot reach the a44 API at "
                                                     f"http://127.0.0.1:{port}")


# --- the selection rule (in-process) ---------------------------------------------------------------------------
def test_selection_rule(tmp_path):
    from anthares44.automation.app.credentials import select_target, store_login
    from anthares44.automation.errors import A44Error
    from anthares44.automation.settings import Settings

    home = tmp_path / "home"
    env = {"home": str(home)}               # the settings the CLI read from the environment

    def pick(project=None, **flags):
        return select_target(Settings(**env), project, **flags)

    assert pick().kind == "local"
    with pytest.raises(A44Error) as exc:
        pick(remote=True)
    assert exc.value.code == "E_NOT_LOGGED_IN"
    assert pick().implicit
    store_login(home, P, "http://127.0.0.1:9", "a44_pat_t", select=False)
    assert pick().kind == "local"                                  # a login stored without selecting it
    t = pick(remote=True)                                          # the one stored login
    assert (t.kind, t.url, t.project, t.token) == ("remote", "http://127.0.0.1:9", P, "a44_pat_t")
    store_login(home, P, "http://127.0.0.1:9", "a44_pat_t")        # what `a44 auth login` does: selects it
    assert pick().remote and pick(P).remote and pick().implicit and not pick(remote=True).implicit
    with pytest.raises(A44Error) as exc:                            # never quietly to another project
        pick("pj_elsewhere")
    assert exc.value.code == "E_NOT_LOGGED_IN" and "pj_elsewhere" in exc.value.message
    store_login(home, "pj_elsewhere", "http://127.0.0.1:12", "a44_pat_e", select=False)
    assert (pick("pj_elsewhere").url, pick("pj_elsewhere").token) == ("http://127.0.0.1:12", "a44_pat_e")
    assert pick().project == P                                     # the selection did not move
    assert pick(local=True).kind == "local"
    env["database_url"] = "postgresql://x@127.0.0.1/db"
    assert pick().kind == "local"                                  # the environment beats a stored default
    assert pick(remote=True).remote                                # the flag beats the environment
    env["api_url"] = "http://127.0.0.1:9"
    with pytest.raises(A44Error) as exc:                            # both set: refuse to guess
        pick()
    assert exc.value.code == "E_INVALID_ARGUMENT"
    del env["database_url"]
    assert pick().remote
    env["api_url"] = "http://127.0.0.1:10"                         # a token is only sent where it was stored for
    with pytest.raises(A44Error) as exc:
        pick()
    assert exc.value.code == "E_NOT_LOGGED_IN"
    env["api_token"] = "a44_pat_env"
    assert pick().token == "a44_pat_env"


def test_login_selects_its_project_and_server_for_the_verbs_that_follow(live, pg_url, tmp_path):
    """The manual's first lines: `a44 auth login --project P`, then `publish` with no flag lands in P on the
    server the login named, and says so; after `logout` the verbs are local again."""
    env = _env(tmp_path)
    login = a44(env, "auth", "login", "--project", P, "--url", live.url, "--token", _token(live, ["automation:write"]))
    assert f"the verbs that follow act on {P} at {live.url}" in login.stderr
    wf = write_workflow(tmp_path / "wf")
    pub = a44(env, "automation", "publish", wf)
    assert pub.stderr.startswith(f"a44: target: remote {live.url} (project {P};")
    assert "wf_demo_pass v1 created" in pub.stdout and f"in project {P}" in pub.stderr
    rows = query(pg_url, "select project_id from automation.workflow_versions where workflow_id = 'wf_demo_pass'")
    assert [r[0] for r in rows] == [P]
    other = a44(env, "automation", "runs", "--project", "pj_default", check=False)   # not quietly elsewhere
    assert other.returncode == 1 and other.stderr.startswith("E_NOT_LOGGED_IN project pj_default has no stored login")
    out = a44(env, "auth", "logout")
    assert "the verbs that follow use local the embedded database (project pj_default" in out.stderr
