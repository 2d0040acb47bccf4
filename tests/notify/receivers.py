"""Real loopback receivers of notifications: an HTTP server (on its own thread, tests/loopback.py) that verifies
the webhook signature with the ingestion's own code and answers as scripted, and an aiosmtpd SMTP server."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime
from email import message_from_bytes, policy

from aiohttp import web
from aiosmtpd.controller import Controller

from anthares44.automation.runtime.ingestion.webhooks import Rejection, check_signature
from anthares44.automation.runtime.postgres.embedded import free_port
from tests.loopback import ThreadedServer


class HttpReceiver(ThreadedServer):
    """POST /hook: records every request; answers the next of `script` (a status, or "hang"), then 200.
    `secret`: the signature must verify (else 401, recorded as unverified). `delay`: seconds before answering."""

    def __init__(self, secret: str | None = None, script=(), delay: float = 0.0):
        self.secret, self.script, self.delay = secret, list(script), delay
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        super().__init__()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/hook", self._hook)

    async def _hook(self, request: web.Request) -> web.Response:
        body = await request.read()
        verified = None
        if self.secret is not None:
            try:
                check_signature([self.secret], request.headers.get("A44-Timestamp"),
                                request.headers.get("A44-Signature"), body, datetime.now(UTC))
                verified = True
            except Rejection:
                verified = False
        with self.lock:
            self.requests.append({"headers": dict(request.headers), "body": body, "verified": verified,
                                  "at": time.monotonic()})
            answer = self.script.pop(0) if self.script else 200
        if self.delay:
            await asyncio.sleep(self.delay)
        if answer == "hang":
            await asyncio.sleep(3600)
        if verified is False:
            return web.Response(status=401, text="bad signature")
        return web.Response(status=answer, text="ok" if answer < 300 else f"scripted {answer}")

    @property
    def hook(self) -> str:
        return f"{self.url}/hook"

    def keys(self) -> list[str]:
        with self.lock:
            return [r["headers"].get("Idempotency-Key") for r in self.requests]


class _Handler:
    def __init__(self):
        self.messages: list[dict] = []

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("refused@"):
            return "550 5.1.1 no such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.messages.append({"from": envelope.mail_from, "to": list(envelope.rcpt_tos),
                              "message": message_from_bytes(envelope.content, policy=policy.default)})
        return "250 Message accepted for delivery"


class SmtpReceiver:
    """aiosmtpd on 127.0.0.1 (its own thread); `messages` as received."""

    def __init__(self):
        self.handler = _Handler()
        self.port = free_port()
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    @property
    def messages(self) -> list[dict]:
        return self.handler.messages

    def stop(self) -> None:
        self.controller.stop()
