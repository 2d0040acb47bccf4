"""The seed manual's `invoice-settle` end to end (Proof 1): real `a44 automation serve` and CLI
subprocesses, the real example plugin `a44-payments` (entry points `payments.authorize` / `payments.void`) whose
effect is an HTTP call to the plugin's loopback stand-in of the payments API, the control store on `pg_url` and
the manual's "managed Postgres" (where `invoices` lives and mark-paid's SQL runs) on the application database
`app_url` (A44_APP_DATABASE_URL).

As written, the manual's `mark-paid` has `$1` and no `params:` (lint warns A44501): PostgreSQL refuses the
statement (E_SQL, permanent), so the run fails at mark-paid and the saga voids the authorization. With
`params: ["{{ input.invoiceId }}"]` added it settles: the invoice is paid, the funds authorized exactly once."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.e2e.support import EXAMPLES, Serve, StandIn, a44, e2e_env, sql

SEED_RUN = ["automation", "run", "wf_invoice_settle", "--input", '{"invoiceId":"inv_8812"}',
            "--idempotency-key", "manual-inv_8812-2026-07-19"]

# §7.4, as the manual writes it (only the run id differs)
MANUAL_QUERY = """select step_id,
       attempt,
       status,
       error_code,
       finished_at - started_at as duration
from automation.step_attempts
where run_id = 'run_01J9XQ'
order by attempt asc, started_at asc;"""

INVOICES_DDL = ["create table invoices (id text primary key, status text not null)",
                "insert into invoices values ('inv_8812', 'open'), ('inv_8813', 'open')"]


@pytest.fixture
def stack(pg_url, app_url, app_dbs, tmp_path):
    for stmt in INVOICES_DDL:
        sql(app_dbs.url(), stmt)
    env = e2e_env(tmp_path, database_url=pg_url, A44_APP_DATABASE_URL=app_url)
    standin = StandIn(env, tmp_path / "standin.log")
    env["A44_PAYMENTS_URL"] = standin.url
    started = [standin]
    try:
        yield env, standin, started
    finally:
        for p in reversed(started):
            p.stop()


def _attempts(url: str, run_id: str) -> list[tuple]:
    rows = sql(url, "select step_id, attempt, kind, status, error_code, idempotency_key from automation.step_attempts "
                    "where run_id = $1 order by started_at, attempt", run_id)
    return [tuple(r.values()) for r in rows]


def test_seed_as_written_fails_at_mark_paid_and_voids_the_authorization(pg_url, app_dbs, stack, tmp_path):
    env, standin, started = stack
    # publish from examples/, the manual's path
    pub = a44("automation", "publish", "./workflows/invoice-settle.yaml", env=env, cwd=EXAMPLES)
    assert pub.returncode == 0, pub.stdout + pub.stderr
    assert "wf_invoice_settle v3 created" in pub.stdout.splitlines(), pub.stdout
    assert "A44501" in pub.stdout + pub.stderr        # `$1` without params: a warning, not a refusal
    started.append(Serve(env, tmp_path / "serve.log"))

    run = a44(*SEED_RUN, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    m = re.fullmatch(r"(run_[0-9A-Z]{26}) created\n", run.stdout)
    assert m, run.stdout
    run_id = m.group(1)

    follow = a44("automation", "logs", run_id, "--follow", env=env, timeout=90)
    assert follow.returncode == 0, follow.stdout + follow.stderr
    out = follow.stdout
    assert re.search(r"attempt\.finished\s+reserve-funds #1 succeeded", out), out
    assert re.search(r"attempt\.finished\s+mark-paid #1 failed E_SQL", out), out
    assert re.search(r"run\.state\s+failed", out.splitlines()[-1]), out

    doc = json.loads(a44("automation", "logs", run_id, "--format", "json", env=env).stdout)
    assert doc["run"]["state"] == "failed"
    assert doc["run"]["failed_step"] == "mark-paid" and doc["run"]["error_code"] == "E_SQL"
    assert "placeholder" in doc["run"]["error_message"], doc["run"]["error_message"]

    # the log: authorize once, mark-paid once (permanent: no retry), then the compensation of reserve-funds
    assert _attempts(pg_url, run_id) == [
        ("reserve-funds", 1, "action", "succeeded", None, f"{run_id}:reserve-funds"),
        ("mark-paid", 1, "action", "failed", "E_SQL", f"{run_id}:mark-paid"),
        ("reserve-funds", 1, "compensation", "compensated", None, f"{run_id}:reserve-funds:compensate"),
    ]

    # the far side: one authorization keyed {run_id}:reserve-funds, voided by the compensation
    state = standin.state()
    (auth,) = state["authorizations"]
    assert auth["idempotencyKey"] == f"{run_id}:reserve-funds" and auth["status"] == "voided"
    assert [(r["method"], r["path"], r["idempotency_key"], r["status"]) for r in state["requests"]] == [
        ("POST", "/v1/authorizations", f"{run_id}:reserve-funds", 201),
        ("POST", f"/v1/authorizations/{run_id}:reserve-funds/void", f"{run_id}:reserve-funds:compensate", 200),
    ]
    assert sql(app_dbs.url(), "select status from invoices where id = 'inv_8812'")[0]["status"] == "open"

    # §7.4: the manual's query, with psql, on the URL `a44 automation db url` prints
    url = a44("automation", "db", "url", env=env).stdout.strip()
    query = MANUAL_QUERY.replace("run_01J9XQ", run_id)
    if shutil.which("psql"):
        psql = subprocess.run(["psql", url, "-X", "-A", "-F", "|", "-t", "-c", query], capture_output=True,
                              text=True, timeout=30)
        assert psql.returncode == 0, psql.stderr
        rows = [line.split("|") for line in psql.stdout.strip().splitlines()]
    else:
        rows = [[str(v) if v is not None else "" for v in r.values()] for r in sql(url, query)]
    assert [r[:4] for r in rows] == [["reserve-funds", "1", "succeeded", ""], ["mark-paid", "1", "failed", "E_SQL"],
                                     ["reserve-funds", "1", "compensated", ""]], rows
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d(\.\d+)?", r[4]) for r in rows), rows

    # the manual's command again: the same key within 24 h is the same run
    again = a44(*SEED_RUN, env=env)
    assert again.returncode == 0, again.stderr
    assert re.fullmatch(rf"{run_id} deduplicated \(key age [0-9.]+s\)\n", again.stdout), again.stdout


FIXED_STEP = '''    query: "update invoices set status='paid' where id = $1"\n'''


def test_seed_with_params_settles_and_authorizes_once(pg_url, app_dbs, stack, tmp_path):
    env, standin, started = stack
    text = (EXAMPLES / "workflows" / "invoice-settle.yaml").read_text()
    assert text.endswith(FIXED_STEP)
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "invoice-settle.yaml").write_text(text + '''    params: ["{{ input.invoiceId }}"]\n''')
    lint = a44("automation", "lint", "--strict", "./workflows/invoice-settle.yaml", env=env, cwd=tmp_path)
    assert lint.returncode == 0, lint.stdout + lint.stderr             # no A44501, plugin resolved
    pub = a44("automation", "publish", "./workflows/invoice-settle.yaml", env=env, cwd=tmp_path)
    assert pub.returncode == 0 and "wf_invoice_settle v3 created" in pub.stdout.splitlines(), pub.stdout + pub.stderr

    standin.fail(path="/v1/authorizations", status=503, times=1)       # the first authorize attempt: a 503
    started.append(Serve(env, tmp_path / "serve.log"))
    run = a44(*SEED_RUN, "--wait", "--timeout", "60s", env=env, timeout=90)
    assert run.returncode == 0, run.stdout + run.stderr + started[-1].output()
    lines = run.stdout.splitlines()
    run_id = lines[0].split()[0]
    assert lines[0] == f"{run_id} created" and re.fullmatch(rf"{run_id} succeeded in \d+(\.\d+)?m?s", lines[1]), lines

    assert [tuple(r.values()) for r in sql(app_dbs.url(), "select id, status from invoices order by id")] == \
        [("inv_8812", "paid"), ("inv_8813", "open")]
    assert _attempts(pg_url, run_id) == [
        ("reserve-funds", 1, "action", "failed", "E_UPSTREAM_503", f"{run_id}:reserve-funds"),
        ("reserve-funds", 2, "action", "succeeded", None, f"{run_id}:reserve-funds"),
        ("mark-paid", 1, "action", "succeeded", None, f"{run_id}:mark-paid"),
    ]
    state = standin.state()
    (auth,) = state["authorizations"]                                  # authorized exactly once
    assert auth["status"] == "authorized" and auth["idempotencyKey"] == f"{run_id}:reserve-funds"
    assert [(r["path"], r["idempotency_key"], r["status"]) for r in state["requests"]] == [
        ("/v1/authorizations", f"{run_id}:reserve-funds", 503),
        ("/v1/authorizations", f"{run_id}:reserve-funds", 201),
    ]
    logs = a44("automation", "logs", run_id, env=env)
    assert re.search(r"mark-paid\s+1\s+action\s+succeeded", logs.stdout), logs.stdout
    doc = json.loads(a44("automation", "logs", run_id, "--format", "json", env=env).stdout)
    assert doc["run"]["state"] == "succeeded"
