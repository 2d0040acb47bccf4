"""A live ingestion server on 127.0.0.1 (its own event loop in a thread, its own Store), project files, and a
small synchronous HTTP client that can send exactly the headers a test wants (doubled ones included)."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from pathlib import Path

from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.http import HttpServer
from anthares44.automation.runtime.ingestion.webhooks import sign
from anthares44.automation.runtime.store import Store

P = "pj_test"

WORKFLOW = """\
name: {name}
version: 1
steps:
  - id: only
    uses: pass
    timeout: 2s
"""

TRIGGERS = """\
- id: trg_hook
  type: webhook
  workflow: wf_hooked

- id: trg_refund_large
  type: event
  event: billing.refund.requested
  filter: "data.amountCents > 500000 && data.currency == 'BRL'"
  workflow: wf_refund
  deliver:
    maxAge: 6h
    dropOnFilterMiss: true

- id: trg_refund_all
  type: event
  event: billing.refund.requested
  workflow: wf_refund
  deliver:
    dropOnFilterMiss: false

- id: trg_refund_kept
  type: event
  event: billing.refund.requested
  filter: "data.currency == 'USD'"
  workflow: wf_audit
  deliver:
    dropOnFilterMiss: false
"""

INLINE = """\
name: inline-flow
version: 1
trigger:
  webhook: true
steps:
  - id: only
    uses: pass
    timeout: 2s
"""


def write_project(root: Path) -> list[str]:
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    (root / "triggers").mkdir(parents=True, exist_ok=True)
    for name in ("hooked", "refund", "audit"):
        (root / "workflows" / f"{name}.yaml").write_text(WORKFLOW.format(name=name))
    (root / "workflows" / "inline.yaml").write_text(INLINE)
    (root / "triggers" / "all.yaml").write_text(TRIGGERS)
    return [str(root)]


class LiveServer:
    """HttpServer + Store on a private loop in a thread; `call(coro_fn)` runs `coro_fn(store)` there."""

    def __init__(self, url: str, clock=None, results_dir: Path | None = None, pool: int = 10):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.clock = clock or SystemClock()

        async def start():
            self.store = await Store.connect(url, clock=self.clock, results_dir=results_dir, max_size=pool)
            await self.store.migrate()
            self.server = await HttpServer(self.store, port=0).start()
        self.run(start())
        self.port = self.server.port
        self.url = self.server.url

    def run(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn, *args, **kwargs):
        return self.run(fn(self.store, *args, **kwargs))

    def counts(self) -> dict:
        return dict(self.run(self.store.fetchrow("ingestion_row_counts")))

    def close(self):
        async def stop():
            await self.server.stop()
            await self.store.close()
        try:
            self.run(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)


def request(port: int, method: str, path: str, body: bytes = b"", headers: list[tuple[str, str]] | None = None,
            timeout: float = 10):
    """(status, parsed JSON or text, headers). `headers` is a list: a name may repeat."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        names = {n.lower() for n, _ in headers or []}
        for name, value in headers or []:
            conn.putheader(name, value)
        if "content-length" not in names:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = raw.decode("utf-8", "replace")
        return resp.status, doc, resp.headers
    finally:
        conn.close()


def signed_headers(secret: str, body: bytes, *, ts: int | None = None, key: str | None = None,
                   content_type: str = "application/json") -> list[tuple[str, str]]:
    ts = int(time.time()) if ts is None else ts
    h = [("Content-Type", content_type), ("A44-Timestamp", str(ts)), ("A44-Signature", sign(secret, ts, body))]
    if key is not None:
        h.append(("A44-Idempotency-Key", key))
    return h


def bearer(token: str) -> list[tuple[str, str]]:
    return [("Authorization", f"Bearer {token}"), ("Content-Type", "application/json")]
