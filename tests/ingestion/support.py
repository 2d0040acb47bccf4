"""A live ingestion server on 127.0.0.1 (its own event loop in a thread, its own Store, its log captured), project
files, a small synchronous HTTP client that can send exactly the headers a test wants (doubled ones included),
and a raw-socket one for bytes no HTTP client would send."""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import logging
import socket
import threading
import time
from pathlib import Path

from anthares44.automation.app.serve import HttpLimits, HttpSettings
from anthares44.automation.clock import SystemClock
from anthares44.automation.http import HttpServer
from anthares44.automation.runtime.ingestion.webhooks import sign
from anthares44.automation.runtime.store.core import Store
from tests import store_queries

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

    def __init__(self, url: str, clock=None, results_dir: Path | None = None, pool: int = 10, limits=None,
                 settings=None):
        self._log = io.StringIO()
        self._handler = logging.StreamHandler(self._log)
        self._handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        for name in ("a44", "aiohttp", "asyncio"):
            logging.getLogger(name).addHandler(self._handler)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.clock = clock or SystemClock()

        async def start():
            self.store = await Store.connect(url, clock=self.clock, results_dir=results_dir, max_size=pool)
            await self.store.migrate()
            self.server = await HttpServer(self.store, HttpSettings(port=0, limits=limits or HttpLimits(),
                                                                  settings=settings)).start()
        self.run(start())
        self.port = self.server.port
        self.url = self.server.url

    def run(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn, *args, **kwargs):
        return self.run(fn(self.store, *args, **kwargs))

    def log_text(self) -> str:
        """Everything the server logged (a44, aiohttp, asyncio) since it started, tracebacks included."""
        return self._log.getvalue()

    def counts(self) -> dict:
        return dict(self.run(store_queries.fetchrow(self.store, "ingestion_row_counts")))

    def close(self):
        async def stop():
            await self.server.stop()
            await self.store.close()
        try:
            self.run(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
            for name in ("a44", "aiohttp", "asyncio"):
                logging.getLogger(name).removeHandler(self._handler)


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


def raw_request(port: int, data: bytes, timeout: float = 10) -> tuple[int, bytes]:
    """Send `data` as is (a whole request with `Connection: close`), read until the server closes: (status,
    body); status 0 when it closed without an answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0), body
