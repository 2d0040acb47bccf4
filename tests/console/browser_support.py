"""What the browser tests and the screenshot script share: a real `a44 automation serve` subprocess with its
HTTP plane on a free loopback port, a loopback far side that fails until it is fixed, a failed run and a dead
letter made by that daemon, and a write token."""

from __future__ import annotations

import asyncio
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from aiohttp import web

from anthares44.automation.compiler.ir import seal, to_json
from anthares44.automation.compiler.models.queues import Queue
from anthares44.automation.runtime import queues as rq
from anthares44.automation.runtime.ingestion.tokens import create_token
from anthares44.automation.runtime.store.core import Store
from tests.loopback import ThreadedServer
from tests.runtime.daemon_support import ServeProcess, call
from tests.runtime.engine_support import PROJECT, node, workflow

CHROMIUM = "/usr/bin/chromium"


class Upstream(ThreadedServer):
    """`POST /charge`: 400 while `broken`, then 200. `POST /slow`: 200 after 0.3 s (a run that keeps changing)."""

    def __init__(self):
        self.broken = True
        super().__init__()

    def routes(self, app):
        async def charge(request):
            if self.broken:
                return web.json_response({"error": "card <b>declined</b>"}, status=400)
            return web.json_response({"charged": True})
        app.router.add_post("/charge", charge)

        async def slow(request):
            await asyncio.sleep(0.3)
            return web.json_response({"ok": True})
        app.router.add_post("/slow", slow)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scene:
    """The daemon, the far side, one failed run of wf_pay and one dead letter of q_dl."""

    def __init__(self, pg_url: str, home: Path):
        self.pg_url = pg_url
        self.far = Upstream()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        charge = call("charge", "http", {"method": "POST", "url": self.far.url + "/charge"}, timeout_ms=5000,
                      retries=0)
        self.pay = workflow([node("fetch", uses="pass", params={"output": "ok"}), charge], name="pay")
        self.dl = seal(workflow([charge.model_copy(update={"id": "s1"})], name="dl").model_copy(
            update={"queue": "q_dl"}))
        self.token, self.run_id = self._call(self._setup())
        self.daemon = ServeProcess(pg_url, home, extra=["--http-port", str(self.port)])
        self.wait(lambda: self._call(self._state()) == "failed", "the run to fail")
        self.wait(lambda: self._call(self._dead_letters()), "a dead letter")
        self.dead_letter_id = self._call(self._dead_letters())[0]

    def _call(self, coro):
        async def go():
            store = await Store.connect(self.pg_url, min_size=1, max_size=2)
            try:
                return await coro(store)
            finally:
                await store.close()
        # on a thread of its own: Playwright's sync API keeps an event loop running in the test's thread
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, go()).result()

    def _setup(self):
        async def go(store):
            await store.migrate()
            for ir in (self.pay, self.dl):
                await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
            await rq.store_queues(store, PROJECT, [Queue(id="q_dl", maxAttempts=1)])
            run = await store.create_run(PROJECT, self.pay.workflow_id, {"invoice": "<script>x</script>"}, "k1")
            raw = (b'{"id":"evt_1","type":"t","idempotency_key":"k-1","partition_key":null,'
                   b'"occurred_at":"2026-07-19T14:02:11.884Z","attempt":1,"data":{"n":1}}')
            await rq.deliver_envelope(store, PROJECT, self.dl.workflow_id, raw)
            tok = await create_token(store, PROJECT, "oncall", ["automation:write"], timedelta(days=1), None)
            return tok.token, run.run_id
        return go

    def start_slow_run(self, key: str, steps: int = 60) -> str:
        """A run of wf_slow: `steps` http steps of 0.3 s each, so its page and the runs list change all along."""
        slow = workflow([call(f"s{i:02d}", "http", {"method": "POST", "url": self.far.url + "/slow"},
                              timeout_ms=5000, retries=0) for i in range(steps)], name="slow")

        async def go(store):
            await store.publish_version(PROJECT, slow.workflow_id, slow.version, slow.sha256, to_json(slow))
            return (await store.create_run(PROJECT, slow.workflow_id, {}, key)).run_id
        run_id = self._call(go)
        self.wait(lambda: self.run(run_id)["state"] == "running", "the slow run to start")
        return run_id

    def run(self, run_id: str) -> dict:
        async def go(store):
            return await store.get_run(run_id)
        return self._call(go)

    def _state(self):
        async def go(store):
            return (await store.get_run(self.run_id))["state"]
        return go

    def _dead_letters(self):
        async def go(store):
            return [r["dead_letter_id"] for r in await rq.dlq_list(store, PROJECT, "q_dl", 10)]
        return go

    def wait(self, predicate, what: str, timeout: float = 30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.daemon.proc.poll() is not None:
                raise AssertionError(f"serve exited: {self.daemon.output()[-2000:]}")
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}: {self.daemon.output()[-2000:]}")

    def close(self):
        self.daemon.stop()
        self.far.close()
