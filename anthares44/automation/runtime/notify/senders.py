"""The senders: one send of one notification to its channel, with a timeout, answered by an `Outcome` (delivered,
retry later, or refused for good). HTTP for the signed webhook and Slack, SMTP (email.py) for email.

Every request carries the notification's idempotency key (`Idempotency-Key` and `A44-Idempotency-Key`; the
email's Message-ID is derived from it): delivery is at least once, and a receiver drops a repeat by the key.
Redirects are not followed (a receiver that moved is a configuration to fix, not a place to guess).
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit

from ...errors import A44Error
from ..ingestion.webhooks import sign
from .mail import send_email
from .messages import Notification, document, slack_body
from .outcome import MAX_ERROR, Outcome, Secrets

RETRY_STATUSES = (408, 429)




def _where(url: str) -> str:
    """The receiver as named in errors and logs: scheme, host and port (a Slack URL's path is its credential)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


class HttpSender:
    """POSTs over one aiohttp session (made on first use, closed by `close`)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._session = None

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> Outcome:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        where = _where(url)
        try:
            async with self._session.post(url, data=body, headers=headers, allow_redirects=False) as resp:
                text = (await resp.content.read(MAX_ERROR)).decode("utf-8", "replace")
                status = resp.status
                retry_after = _retry_after(resp.headers.get("Retry-After"))
        except TimeoutError:
            return Outcome.later(f"{where} did not answer within {self.timeout:g}s")
        except aiohttp.ClientError as exc:
            return Outcome.later(f"{where}: {type(exc).__name__}: {exc}")
        except OSError as exc:
            return Outcome.later(f"{where}: {exc}")
        if 200 <= status < 300:
            return Outcome.ok()
        answer = f"{where} answered HTTP {status}" + (f": {text.strip()}" if text.strip() else "")
        if status in RETRY_STATUSES or status >= 500:
            return Outcome.later(answer, retry_after)
        return Outcome.refused(answer)

    async def webhook(self, n: Notification, config: dict, secrets: Secrets) -> Outcome:
        try:
            secret = await secrets(config["secretRef"])
        except A44Error as exc:
            return Outcome.of_error(exc)
        body = json.dumps(document(n), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        ts = int(time.time())      # wall: the receiver checks the skew against its own (real) clock
        headers = {"Content-Type": "application/json", "A44-Timestamp": str(ts),
                   "A44-Signature": sign(secret, ts, body), "A44-Idempotency-Key": n.idempotency_key,
                   "Idempotency-Key": n.idempotency_key, "User-Agent": "a44-notify"}
        return await self._post(config["url"], body, headers)

    async def slack(self, n: Notification, config: dict, secrets: Secrets) -> Outcome:
        body = json.dumps(slack_body(n), ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Idempotency-Key": n.idempotency_key,
                   "User-Agent": "a44-notify"}
        return await self._post(config["url"], body, headers)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class Senders:
    """`send(notification, kind, config)` to the sender of the channel's kind."""

    def __init__(self, secrets: Secrets, timeout: float):
        self.secrets, self.timeout = secrets, timeout
        self.http = HttpSender(timeout)
        self._email = send_email

    async def send(self, n: Notification, kind: str | None, config: Any) -> Outcome:
        if kind == "webhook":
            return await self.http.webhook(n, config, self.secrets)
        if kind == "slack":
            return await self.http.slack(n, config, self.secrets)
        if kind == "email":
            return await self._email(n, config, self.secrets, self.timeout)
        # the channel was removed after the message was queued: kept, retried, so re-creating it delivers it
        return Outcome.later(f"channel {n.channel} does not exist (a44 monitor channel create --name {n.channel} ...)")

    async def close(self) -> None:
        await self.http.close()
