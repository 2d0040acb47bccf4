"""Signals over REST and the CLI against a real `a44 automation serve` (issue 28): `POST
/v1/automation/runs/{id}/signals/{name}` answers 202 (buffered, then delivered), 404 for an unknown run, 413 over
256 KB, 409 with the state for a finished run, 403 for a read token; `a44 automation signal` (local and remote)
and `run --signal NAME=JSON` start a run that consumes it; `logs RUN` and `runs` say what a waiting run waits on."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from datetime import timedelta

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import NodeIR, RetryIR, to_json
from anthares44.automation.runtime.ingestion.tokens import create_token
from anthares44.automation.runtime.postgres.embedded import free_port
from anthares44.automation.runtime.store.core import Store
from tests.ingestion.support import bearer, request
from tests.runtime.daemon_support import A44, ServeProcess, wait_until
from tests.runtime.engine_support import PROJECT, workflow
from tests.runtime.pg import query
from tests.waits.test_signals import wait_node


def _pass(id: str, output) -> NodeIR:
    from tests.runtime.daemon_support import _builtin

    return NodeIR(id=id, index=0, kind="call", connector=_builtin("pass"), timeout_ms=5_000,
                  retry=RetryIR(max=0, strategy="none", base_ms=100, cap_ms=100), compensate=None, condition=None,
                  exclusive=False, sleep_ms=None, params={"output": output})


IR = workflow([wait_node("first", "go", timeout_ms=600_000), wait_node("second", "go", timeout_ms=600_000),
               _pass("done", {"$tpl": "{{ steps.first.output.signal.data.n }}-{{ steps.second.output.signal.data.n }}"})],
              name="signal_serve")


async def _setup(url: str, home) -> tuple[str, dict[str, str]]:
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.migrate()
        await store.ensure_partitions()
        await store.publish_version(PROJECT, IR.workflow_id, IR.version, IR.sha256, to_json(IR))
        tokens = {scope: (await create_token(store, PROJECT, scope.split(":")[1], [scope],
                                             timedelta(days=1))).token
                  for scope in ("automation:read", "automation:write")}
        return (await store.create_run(PROJECT, IR.workflow_id, {}, "serve-1")).run_id, tokens
    finally:
        await store.close()


def _state(url: str, run_id: str) -> str:
    return query(url, "select state from automation.runs where run_id = $1", run_id)[0][0]


def _result(url: str, run_id: str):
    return query(url, "select result::text from automation.runs where run_id = $1", run_id)[0][0]


def _cli(env: dict, *argv) -> subprocess.CompletedProcess:
    return subprocess.run([A44, "automation", *argv], env=env, capture_output=True, text=True, timeout=60)


def test_signals_over_rest_and_the_cli(pg_url, tmp_path):
    run_id, tokens = asyncio.run(_setup(pg_url, tmp_path))
    port = free_port()
    write = bearer(tokens["automation:write"])
    path = f"/v1/automation/runs/{run_id}/signals/go"
    # before any daemon: buffered (202)
    local = {**os.environ, "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path)}
    local.pop("A44_API_URL", None)
    p = _cli(local, "signal", run_id, "go", "--data", '{"n": 1}', "--idempotency-key", "one", "--format", "json")
    assert p.returncode == 0 and json.loads(p.stdout)["outcome"] == "buffered", p.stderr
    daemon = ServeProcess(pg_url, tmp_path, worker_id="s1", lease="60s", extra=["--http-port", str(port)])
    try:
        wait_until(lambda: _state(pg_url, run_id) == "waiting", 30, "the run to wait on its second signal")
        p = _cli(local, "logs", run_id)
        assert p.returncode == 0 and "waiting on signal go (step second) until " in p.stdout, (p.stdout, p.stderr)
        p = _cli(local, "runs", "--state", "waiting")
        assert p.returncode == 0 and "second (signal go)" in p.stdout, (p.stdout, p.stderr)
        status, doc, _ = request(port, "POST", path, b'{"data": {"n": 2}}', bearer(tokens["automation:read"]))
        assert status == 403
        status, doc, _ = request(port, "POST", path, json.dumps({"data": "x" * 262_145}).encode(), write)
        assert status == 413 and doc["error"]["code"] == "E_SIGNAL_TOO_LARGE"
        status, doc, _ = request(port, "POST", "/v1/automation/runs/run_nope/signals/go", b"{}", write)
        assert status == 404 and doc["error"]["code"] == "E_RUN_NOT_FOUND"
        body = json.dumps({"data": {"n": 2}, "idempotency_key": "two"}).encode()
        status, doc, _ = request(port, "POST", path, body, write)
        assert status == 202 and doc["outcome"] == "delivered", doc
        wait_until(lambda: _state(pg_url, run_id) == "succeeded", 30, "the run to succeed")
        assert json.loads(_result(pg_url, run_id)) == {"done": "1-2"}
        status, doc, _ = request(port, "POST", path, body, write)         # the same key: the first answer
        assert status == 202 and doc["outcome"] == "duplicate"
        status, doc, _ = request(port, "POST", path, json.dumps({"data": 3}).encode(), write)
        assert status == 409 and doc["error"]["code"] == "E_SIGNAL_RUN_FINISHED"
        assert doc["error"]["details"]["state"] == "succeeded"
        remote = {**os.environ, "A44_HOME": str(tmp_path / "remote"), "A44_API_TOKEN": tokens["automation:write"],
                  "A44_API_URL": f"http://127.0.0.1:{port}"}
        remote.pop("A44_DATABASE_URL", None)
        p = _cli(remote, "signal", run_id, "go", "--data", "3")
        assert p.returncode == 1 and "E_SIGNAL_RUN_FINISHED" in p.stderr, (p.stdout, p.stderr)
        # `run --signal` (here through the REST API) starts a run and signals it: both waits take theirs, in order
        p = _cli(remote, "run", IR.workflow_id, "-k", "with-signals", "--signal", 'go={"n": 7}', "--signal",
                 'go={"n": 8}', "--wait", "--timeout", "30s", "--format", "json")
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert json.loads(p.stdout)["run"]["result"] == {"done": "7-8"}
    finally:
        daemon.stop()
