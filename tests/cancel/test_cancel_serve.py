"""`runs cancel` against a real `a44 automation serve` subprocess: the daemon holding a run whose HTTP step is
blocked in a loopback server learns of the cancel (NOTIFY a44_run_cancel), cancels the call and ends the run
`cancelled` long before its lease would expire; `--compensate` calls the completed steps' compensations (counted
by the loopback server); `kill -9` of the daemon while it cancels leaves a consistent run that another daemon
finishes; `POST /v1/automation/runs/{id}/cancel` needs a write token."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from datetime import timedelta

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import CompensationIR, to_json
from anthares44.automation.runtime.engine.states import is_legal
from anthares44.automation.runtime.ingestion.tokens import create_token
from anthares44.automation.runtime.postgres.embedded import free_port
from anthares44.automation.runtime.store.core import Store
from tests.ingestion.support import bearer, request
from tests.runtime.daemon_support import A44, FarSide, ServeProcess, _builtin, call, wait_until
from tests.runtime.engine_support import PROJECT, workflow
from tests.runtime.pg import query

FAST_UNDO = (200, 200, 200)      # compensation waits of the test's workflow (the default is 5 s / 20 s / 60 s)


def _workflow(far: FarSide, compensate: bool = False):
    """first (http /ok/first; undone by http /ok/undo) -> middle (http /hold/middle, held until released)."""
    first = call("first", "http", {"method": "POST", "url": far.url("/ok/first")})
    if compensate:
        first = first.model_copy(update={"compensate": CompensationIR(
            connector=_builtin("http"), timeout_ms=5_000, delays_ms=FAST_UNDO,
            params={"method": "POST", "url": far.url("/ok/undo")})})
    return workflow([first, call("middle", "http", {"method": "POST", "url": far.url("/hold/middle")})],
                    name="cancel")


async def _setup(url: str, home, ir, tokens: tuple[str, ...] = ()) -> tuple[str, dict[str, str]]:
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.migrate()
        await store.ensure_partitions()
        await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        made = {scope: (await create_token(store, PROJECT, scope.split(":")[1], [scope], timedelta(days=1))).token
                for scope in tokens}
        return (await store.create_run(PROJECT, ir.workflow_id, {}, "k1")).run_id, made
    finally:
        await store.close()


def _cli(url: str, home, *argv) -> tuple[int, str, str]:
    env = {**os.environ, "A44_DATABASE_URL": url, "A44_HOME": str(home)}
    env.pop("A44_API_URL", None)
    p = subprocess.run([A44, "automation", *argv], env=env, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def _state(url: str, run_id: str) -> str:
    return query(url, "select state from automation.runs where run_id = $1", run_id)[0][0]


def _attempts(url: str, run_id: str) -> list[tuple]:
    return [tuple(r) for r in query(url, "select step_id, kind, status from automation.step_attempts where run_id = $1"
                                         " order by started_at, kind, attempt", run_id)]


def _changes(url: str, run_id: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in query(url, "select data->>'from', state from automation.run_events where run_id = $1"
                                             " and kind = 'run.state' order by id", run_id)]


def test_a_running_http_step_is_cancelled_and_the_run_ends_cancelled_at_once(pg_url, tmp_path):
    far = FarSide()
    run_id, _ = asyncio.run(_setup(pg_url, tmp_path, _workflow(far)))
    daemon = ServeProcess(pg_url, tmp_path, worker_id="c1", lease="60s")   # its lease would outlive the test
    try:
        assert far.held.wait(30), daemon.output()
        t0 = time.monotonic()
        code, out, err = _cli(pg_url, tmp_path, "runs", "cancel", run_id, "--reason", "customer called",
                              "--by", "ana", "--format", "json")
        assert code == 0, err
        assert (json.loads(out)["outcome"], json.loads(out)["state"]) == ("requested", "running")
        wait_until(lambda: _state(pg_url, run_id) == "cancelled", 20, "the run to end cancelled")
        assert time.monotonic() - t0 < 15          # bounded: the held call never answers, the lease is 60 s
        assert _attempts(pg_url, run_id) == [("first", "action", "succeeded"), ("middle", "action", "cancelled")]
        assert all(is_legal(a, b) for a, b in _changes(pg_url, run_id))
        assert far.count("/hold/middle") == 1
        code, out, _ = _cli(pg_url, tmp_path, "runs", "cancel", run_id)
        assert code == 0 and "already cancelled" in out
    finally:
        daemon.stop()
        far.close()


def test_compensate_calls_the_completed_steps_compensations_then_ends_cancelled(pg_url, tmp_path):
    far = FarSide()
    run_id, _ = asyncio.run(_setup(pg_url, tmp_path, _workflow(far, compensate=True)))
    daemon = ServeProcess(pg_url, tmp_path, worker_id="c2", lease="60s")
    try:
        assert far.held.wait(30), daemon.output()
        code, out, err = _cli(pg_url, tmp_path, "runs", "cancel", run_id, "--compensate")
        assert code == 0 and "compensates its completed steps" in out, err
        wait_until(lambda: _state(pg_url, run_id) == "cancelled", 30, "the run to end cancelled")
        assert far.count("/ok/undo") == 1
        assert _attempts(pg_url, run_id) == [("first", "action", "succeeded"), ("middle", "action", "cancelled"),
                                             ("first", "compensation", "compensated")]
        assert _changes(pg_url, run_id)[-2:] == [("running", "compensating"), ("compensating", "cancelled")]
    finally:
        daemon.stop()
        far.close()


def test_kill_9_while_cancelling_leaves_a_consistent_run_another_daemon_finishes(pg_url, tmp_path):
    far = FarSide()
    run_id, _ = asyncio.run(_setup(pg_url, tmp_path, _workflow(far)))
    first = ServeProcess(pg_url, tmp_path, worker_id="k1", lease="2s")
    second = None
    try:
        assert far.held.wait(30), first.output()
        code, _, err = _cli(pg_url, tmp_path, "runs", "cancel", run_id)
        first.kill9()                              # before, during or after it stops the run
        assert code == 0, err
        assert _state(pg_url, run_id) in ("running", "cancelled")
        second = ServeProcess(pg_url, tmp_path, worker_id="k2", lease="2s")
        wait_until(lambda: _state(pg_url, run_id) == "cancelled", 30, "the run to end cancelled")
        steps = _attempts(pg_url, run_id)
        assert steps[0] == ("first", "action", "succeeded") and steps[1][:2] == ("middle", "action")
        assert steps[1][2] in ("cancelled", "lease_expired") and len(steps) == 2   # never attempted again
        assert not any(s == "running" for *_, s in steps)
        assert all(is_legal(a, b) for a, b in _changes(pg_url, run_id))
        assert far.count("/hold/middle") == 1
    finally:
        for p in (first, second):
            if p is not None:
                p.stop()
        far.close()


def test_rest_cancel_needs_a_write_token(pg_url, tmp_path):
    far = FarSide()
    run_id, tokens = asyncio.run(_setup(pg_url, tmp_path, _workflow(far), ("automation:read", "automation:write")))
    port = free_port()
    daemon = ServeProcess(pg_url, tmp_path, worker_id="r1", lease="60s", extra=["--http-port", str(port)])
    try:
        assert far.held.wait(30), daemon.output()
        path, body = f"/v1/automation/runs/{run_id}/cancel", json.dumps({"reason": "api"}).encode()
        status, doc, _ = request(port, "POST", path, body, bearer(tokens["automation:read"]))
        assert status == 403 and _state(pg_url, run_id) == "running"
        status, doc, _ = request(port, "POST", path, body, bearer(tokens["automation:write"]))
        assert status == 200 and (doc["outcome"], doc["by"], doc["reason"]) == ("requested", "token:write", "api")
        wait_until(lambda: _state(pg_url, run_id) == "cancelled", 20, "the run to end cancelled")
        status, doc, _ = request(port, "POST", path, body, bearer(tokens["automation:write"]))
        assert status == 200 and doc["outcome"] == "already_cancelled"
        env = {**os.environ, "A44_HOME": str(tmp_path / "remote"), "A44_API_TOKEN": tokens["automation:write"],
               "A44_API_URL": f"http://127.0.0.1:{port}"}
        env.pop("A44_DATABASE_URL", None)
        p = subprocess.run([A44, "automation", "runs", "cancel", run_id], env=env, capture_output=True, text=True,
                           timeout=60)     # the CLI's remote mode
        assert p.returncode == 0 and "was already cancelled" in p.stdout, p.stderr
        status, doc, _ = request(port, "POST", "/v1/automation/runs/run_nope/cancel", b"{}",
                                 bearer(tokens["automation:write"]))
        assert status == 404 and doc["error"]["code"] == "E_RUN_NOT_FOUND"
    finally:
        daemon.stop()
        far.close()


def test_a_pending_and_a_sleeping_run_are_cancelled_at_once_and_never_run_on(pg_url, tmp_path):
    far = FarSide()
    ir = workflow([call("first", "http", {"method": "POST", "url": far.url("/ok/first")}),
                   call("nap", "sleep", {}).model_copy(update={"kind": "sleep", "connector": None, "timeout_ms": None,
                                                               "sleep_ms": 3_600_000}),
                   call("after", "http", {"method": "POST", "url": far.url("/ok/after")})], name="nap")
    sleeper, _ = asyncio.run(_setup(pg_url, tmp_path, ir))
    queued = asyncio.run(_second_run(pg_url, tmp_path, ir))
    code, out, err = _cli(pg_url, tmp_path, "runs", "cancel", queued, "--format", "json")   # no daemon yet
    assert code == 0 and (json.loads(out)["outcome"], json.loads(out)["previous_state"]) == ("cancelled", "pending")
    daemon = ServeProcess(pg_url, tmp_path, worker_id="s1", lease="60s")
    try:
        wait_until(lambda: _state(pg_url, sleeper) == "sleeping", 30, "the run to sleep")
        code, out, err = _cli(pg_url, tmp_path, "runs", "cancel", sleeper, "--format", "json")
        assert code == 0 and (json.loads(out)["outcome"], json.loads(out)["previous_state"]) == \
            ("cancelled", "sleeping"), err
        assert _attempts(pg_url, sleeper) == [("first", "action", "succeeded"), ("nap", "action", "cancelled")]
        assert _state(pg_url, queued) == "cancelled" and _attempts(pg_url, queued) == []
        assert far.count("/ok/first") == 1 and far.count("/ok/after") == 0
    finally:
        daemon.stop()
        far.close()


async def _second_run(url: str, home, ir) -> str:
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        return (await store.create_run(PROJECT, ir.workflow_id, {}, "k2")).run_id
    finally:
        await store.close()
