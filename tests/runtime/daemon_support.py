"""Helpers of the tests that run `a44 automation serve` as a real process: the daemon subprocess, a loopback
aiohttp server standing in for the far side (it counts requests per idempotency key and can hold them), and a
workflow of the built-in `http` and `sql/execute` connectors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from aiohttp import web

from anthares44.automation.compiler.ir import ConnectorRef, NodeIR, RetryIR
from tests.loopback import ThreadedServer
from tests.runtime.engine_support import workflow

A44 = str(Path(sys.executable).parent / "a44")


class FarSide(ThreadedServer):
    """`POST /ok/<name>` answers at once; `POST /hold/<name>` waits until `release()` (or `hold_s`). Counts hits per
    (path, Idempotency-Key)."""

    def __init__(self, hold_s: float | None = None):
        self.hits: Counter[tuple[str, str]] = Counter()
        self.held = threading.Event()       # a /hold request arrived
        self._go = threading.Event()
        self.hold_s = hold_s
        super().__init__()

    def routes(self, app):
        app.router.add_post("/ok/{name}", self._ok)
        app.router.add_post("/hold/{name}", self._hold)

    async def _ok(self, request):
        self.hits[(request.path, request.headers.get("Idempotency-Key", ""))] += 1
        return web.json_response({"ok": True})

    async def _hold(self, request):
        self.hits[(request.path, request.headers.get("Idempotency-Key", ""))] += 1
        self.held.set()
        if self.hold_s is not None:
            await asyncio.sleep(self.hold_s)
        else:
            while not self._go.is_set():
                await asyncio.sleep(0.02)
        return web.json_response({"held": True})

    def release(self):
        self._go.set()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def count(self, path: str) -> int:
        return sum(n for (p, _), n in self.hits.items() if p == path)


def _builtin(uses: str) -> ConnectorRef:
    return ConnectorRef(uses=uses, kind="builtin", type=uses)


def call(id: str, uses: str, params: dict, timeout_ms: int = 20_000, retries: int = 3) -> NodeIR:
    return NodeIR(id=id, index=0, kind="call", connector=_builtin(uses), timeout_ms=timeout_ms,
                  retry=RetryIR(max=retries, strategy="exponential-jitter", base_ms=100, cap_ms=500),
                  compensate=None, condition=None, exclusive=False, sleep_ms=None, params=params)


EFFECTS_DDL = "create table if not exists effects (run_id text, step_id text, at timestamptz default now(), " \
              "primary key (run_id, step_id))"


def http_sql_workflow(far: FarSide, name: str = "crash", hold: bool = True):
    """first (http /ok) -> middle (http /hold, or /ok) -> effect (sql insert ... on conflict do nothing, on the
    application database: EFFECTS_DDL there) -> done."""
    return workflow([
        call("first", "http", {"method": "POST", "url": far.url("/ok/first"), "json": {"run": {"$tpl": "{{ run.id }}"}}}),
        call("middle", "http", {"method": "POST", "url": far.url("/hold/middle" if hold else "/ok/middle")}),
        call("effect", "sql/execute", {
            "query": "insert into effects (run_id, step_id) values ($1, $2) on conflict (run_id, step_id) do nothing",
            "params": [{"$tpl": "{{ run.id }}"}, {"$tpl": "{{ run.step_id }}"}]}),
        call("done", "pass", {"output": {"$tpl": "{{ steps.effect.output.rowCount }}"}}),
    ], name=name)


class ServeProcess:
    def __init__(self, url: str, home: Path, *, lease: str = "2s", worker_id: str = "d1", extra: list[str] = (),
                 app_url: str | None = None, a44: str = A44):
        env = {**os.environ, "A44_DATABASE_URL": url, "A44_HOME": str(home), "A44_LEASE_TIMEOUT": lease,
               "PYTHONUNBUFFERED": "1"}
        env.pop("A44_APP_DATABASE_URL", None)
        if app_url:     # where the workflow's sql/execute steps run
            env["A44_APP_DATABASE_URL"] = app_url
        self.log = home / f"serve-{worker_id}.log"
        self._fh = open(self.log, "w")
        self.proc = subprocess.Popen([a44, "automation", "serve", "-v", "--worker-id", worker_id, *extra],
                                     env=env, stdout=self._fh, stderr=subprocess.STDOUT)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def term(self, timeout: float = 20) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def output(self) -> str:
        self._fh.flush()
        return self.log.read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._fh.close()


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
