"""Workflow SQL cannot reach the control store (SPEC §14, §17), shown through the public interface only: a real
`a44 automation serve --http-port` daemon (control store `pg_url`, application database `app_url`), tokens made
with `a44 auth token create`, workflows published and run over REST with a project's write token, each run's log
read back over REST. The four attacks of the review, each of which succeeded when sql/execute ran on the store's
own pool, are refused with a coded attempt in the log; an ordinary workflow's table in the application database
works; and a daemon pointed at the control store as its application database refuses to run any workflow SQL."""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from anthares44.automation.runtime.postgres.embedded import free_port
from tests.e2e.support import sql
from tests.runtime.daemon_support import A44, ServeProcess
from tests.runtime.pg import _admin, database_name, with_database

ATTACKER, VICTIM = "pj_attacker", "pj_victim"
TERMINAL = {"succeeded", "failed", "compensation_failed", "cancelled"}


def workflow(name: str, *steps: tuple[str, str, list]) -> str:
    """A workflow of sql/execute steps (id, query, params): the text a workflow author publishes."""
    out = [f"name: {name}", "version: 1", "steps:"]
    for step_id, query, params in steps:
        out += [f"  - id: {step_id}", "    uses: sql/execute", "    timeout: 5s", "    retry: { max: 1 }",
                f"    query: {json.dumps(query)}", f"    params: {json.dumps(params)}"]
    return "\n".join(out) + "\n"


class Api:
    """The REST API of one daemon, as a project's token holder calls it."""

    def __init__(self, base: str, token: str):
        self.base, self.token = base, token

    def call(self, method: str, path: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict]:
        req = urllib.request.Request(self.base + "/v1/automation" + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {token or self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)

    def publish(self, name: str, text: str) -> None:
        status, doc = self.call("POST", "/publish", {"files": {f"workflows/{name}.yaml": text}})
        assert status == 200, doc

    def run(self, workflow_id: str, input: dict | None = None) -> dict:
        """Start a run and wait for its end; returns {"run": ..., "attempts": [...]} from the logs endpoint."""
        status, doc = self.call("POST", "/runs", {"workflow": workflow_id, "input": input or {},
                                                  "idempotency_key": secrets.token_hex(8)})
        assert status == 202, doc
        run_id = doc["run_id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, logs = self.call("GET", f"/runs/{run_id}/logs")
            if logs["run"]["state"] in TERMINAL:
                return logs
            time.sleep(0.1)
        raise AssertionError(f"{run_id} did not finish: {logs}")


def token(env: dict, project: str) -> str:
    out = subprocess.run([A44, "auth", "token", "create", "--project", project, "--name", "t",
                          "--scope", "automation:write", "--format", "json"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["token"]


@pytest.fixture
def daemon(pg_url, app_url, app_dbs, tmp_path):
    """start(app_database_url) -> (attacker's Api, victim's Api) of a fresh daemon (the previous one stopped, so
    the new one runs every run)."""
    procs = []
    for p in (ATTACKER, VICTIM):
        app_dbs.url(p)

    def start(app: str | None = app_url):
        for p in procs:
            p.stop()
        port = free_port()
        proc = ServeProcess(pg_url, tmp_path, worker_id=f"d{len(procs)}", lease="30s", app_url=app,
                            extra=["--http-port", str(port)])
        procs.append(proc)
        env = {"PATH": str(Path(A44).parent), "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path)}
        apis = tuple(Api(f"http://127.0.0.1:{port}", token(env, p)) for p in (ATTACKER, VICTIM))
        deadline = time.monotonic() + 30
        while "http listening on" not in proc.output():
            assert time.monotonic() < deadline and proc.proc.poll() is None, proc.output()
            time.sleep(0.05)
        return apis

    start.procs = procs         # the daemons started so far, the running one last
    yield start
    for p in procs:
        p.stop()


def refused(logs: dict) -> dict:
    """The run failed at its only step, refused once (a permanent code: never retried)."""
    assert logs["run"]["state"] == "failed", logs
    (attempt,) = logs["attempts"]
    assert attempt["status"] == "failed" and logs["run"]["error_code"] == attempt["error_code"], logs
    return attempt


def test_the_four_attacks_are_refused_with_a_code_and_leave_no_trace(daemon, pg_url, app_dbs):
    attacker, victim = daemon()
    victim.publish("payroll", workflow("payroll", ("pay", "select $1::text as iban", ["{{ input.iban }}"])))
    assert victim.run("payroll", {"iban": "DE02120300000000202051"})["run"]["state"] == "succeeded"

    # (1) another project's run inputs
    attacker.publish("peek", workflow("peek", ("read", "select input from automation.runs where project_id = $1",
                                              [VICTIM])))
    a = refused(attacker.run("peek"))
    assert a["error_code"] == "E_SQL" and 'relation "automation.runs" does not exist' in a["error_message"], a

    # (2) the webhook secrets table
    attacker.publish("count", workflow("count", ("count", "select count(*) as n from automation.webhook_secrets",
                                                 [])))
    a = refused(attacker.run("count"))
    assert a["error_code"] == "E_SQL" and "automation.webhook_secrets" in a["error_message"], a

    # (3) mint a write token for the victim's project
    minted = "a44_pat_" + secrets.token_urlsafe(32)
    attacker.publish("mint", workflow("mint", (
        "mint", "insert into automation.api_tokens (token_id, project_id, name, token_sha256, scopes, allow_cidrs, "
                "created_at) values ('tok_minted', $1, 'minted', $2, '{automation:write}', '{}', now())",
        [VICTIM, hashlib.sha256(minted.encode()).hexdigest()])))
    a = refused(attacker.run("mint"))
    assert a["error_code"] == "E_SQL" and "automation.api_tokens" in a["error_message"], a
    status, doc = attacker.call("GET", "/whoami", token=minted)
    assert status == 401 and doc["error"]["code"] == "E_TOKEN_INVALID", doc
    assert sql(pg_url, "select count(*) as n from automation.api_tokens where token_id = 'tok_minted'")[0]["n"] == 0

    # (4) a shell command on the database host
    target = Path(tempfile.gettempdir()) / f"a44-attack-{secrets.token_hex(6)}"
    attacker.publish("shell", workflow("shell", ("shell", f"copy (select 1) to program 'id > {target}'", [])))
    a = refused(attacker.run("shell"))
    assert a["error_code"] == "E_SQL_FORBIDDEN" and "42501" in a["error_message"], a
    assert not target.exists()

    # what a workflow may do: its own tables in the application database
    attacker.publish("ledger", workflow(
        "ledger",
        ("table", "create table if not exists ledger (run_id text primary key, amount numeric not null)", []),
        ("insert", "insert into ledger values ($1, $2) on conflict (run_id) do nothing",
         ["{{ run.id }}", "{{ input.amount }}"]),
        ("read", "select amount from ledger where run_id = $1", ["{{ run.id }}"])))
    logs = attacker.run("ledger", {"amount": "12.50"})
    assert logs["run"]["state"] == "succeeded", logs
    assert [(r["run_id"], r["amount"]) for r in sql(app_dbs.url(ATTACKER), "select run_id, amount::text from ledger")] == \
        [(logs["run"]["run_id"], "12.50")]


def test_a_daemon_given_the_control_store_as_its_app_database_runs_no_workflow_sql(daemon, pg_url, pg_admin_url,
                                                                                  pg_template, tmp_path):
    """The wall: A44_APP_DATABASE_URL pointing at a control store (here also as a superuser) is refused before the
    first statement; so is a daemon on an external control store with no application database at all; and one URL
    for every project (no `{project}`, here the control store itself) stops `serve` before it serves anything."""
    asyncio.run(_admin(pg_admin_url, f"create database ctl_{ATTACKER} template {pg_template}"))
    try:
        for app, code, words in ((with_database(pg_url, "ctl_{project}"), "E_SQL_UNSAFE_DATABASE", "automation"),
                                 (None, "E_SQL_NO_DATABASE", "no application database")):
            attacker, _ = daemon(app)
            attacker.publish("probe", workflow("probe", ("probe", "select count(*) from automation.api_tokens", [])))
            a = refused(attacker.run("probe"))
            assert a["error_code"] == code and words in a["error_message"], a
    finally:
        asyncio.run(_admin(pg_admin_url, f"drop database if exists ctl_{ATTACKER} with (force)"))
    env = {"PATH": str(Path(A44).parent), "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path),
           "A44_APP_DATABASE_URL": pg_url}
    out = subprocess.run([A44, "automation", "serve", "--http-port", str(free_port())], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "E_SQL_UNSAFE_DATABASE" in out.stderr and "{project}" in out.stderr, out.stderr


def test_a_project_whose_grants_are_wrong_is_named_at_start_and_the_others_run(daemon, app_dbs, pg_admin_url):
    """With A44_APP_DATABASE_URL (the operator made the roles), a daemon start opens one connection per published
    project through the wall: a project role that may connect to another project's database is named in a warning
    at start and its steps are refused; the other project's SQL runs."""
    attacker, victim = daemon()
    for api in (attacker, victim):
        api.publish("probe", workflow("probe", ("probe", "select current_user as r", [])))
    a_role, v_db = database_name(app_dbs.url(ATTACKER)), database_name(app_dbs.url(VICTIM))
    asyncio.run(_admin(pg_admin_url, f"grant connect on database {v_db} to {a_role}"))
    try:
        attacker, victim = daemon()         # a new start: both projects are published now
        warnings = [line for line in daemon.procs[-1].output().splitlines() if "workflow SQL of project" in line]
        assert len(warnings) == 1 and ATTACKER in warnings[0] and f"may connect to {v_db}" in warnings[0], warnings
        assert victim.run("probe")["run"]["state"] == "succeeded"
        a = refused(attacker.run("probe"))
        assert a["error_code"] == "E_SQL_UNSAFE_DATABASE" and f"may connect to {v_db}" in a["error_message"], a
    finally:
        asyncio.run(_admin(pg_admin_url, f"revoke connect on database {v_db} from {a_role}"))
