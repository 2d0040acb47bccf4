"""One-click approval links (§20, docs/approvals.md): a token bound to (project, run, epoch, step, person, expiry) and a
random nonce, signed with HMAC-SHA256 by the server's key (`approval_link_keys`, made on first use). The token is
`<payload>.<signature>`, both base64url: the payload is small JSON. `verify` refuses, with a clear error and never
a crash, a token that is malformed, altered or signed by another key (E_APPROVAL_LINK_INVALID) or expired
(E_APPROVAL_LINK_EXPIRED); that a link is used once is the decision's own transaction (`approval_link_uses`).

    token = await sign(store, Link(project, run_id, epoch, step, person, expires_at))
    link = verify(await key(store), token, now)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from ...errors import E_APPROVAL_LINK_EXPIRED, E_APPROVAL_LINK_INVALID, A44Error

MAX_TOKEN = 2048          # a real token is ~300 characters; anything longer is refused unread
PATH = "/approvals/links/"
PUBLIC_URL = "approval.public_url"     # the engine's services key of A44_PUBLIC_URL (worker.py puts it there)


def url(base: str | None, path: str) -> str | None:
    """The link a person clicks: `path` under the daemon's public address, or None when none is set or it is not
    an http(s) address without query or fragment (a bad setting never makes a link to somewhere else)."""
    from urllib.parse import urlsplit

    if not base:
        return None
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        return None
    return base.rstrip("/") + path


@dataclass(frozen=True)
class Link:
    project: str
    run_id: str
    epoch: int
    step_id: str
    person: str
    expires_at: datetime
    nonce: str = ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def key(store) -> bytes:
    """The server's link key (made once, from 32 random bytes, by whichever daemon asks first)."""
    value = await store.fetchval("approval_link_key", key=secrets.token_bytes(32), now=store.clock.now())
    return bytes(value)


def sign_with(k: bytes, link: Link) -> str:
    body = {"j": link.project, "r": link.run_id, "e": link.epoch, "s": link.step_id, "p": link.person,
            "x": int(link.expires_at.timestamp()), "n": link.nonce or secrets.token_urlsafe(12)}
    payload = _b64(json.dumps(body, separators=(",", ":"), sort_keys=True).encode())
    return payload + "." + _b64(hmac.new(k, payload.encode(), hashlib.sha256).digest())


async def sign(store, link: Link) -> str:
    return sign_with(await key(store), link)


def _invalid(why: str) -> A44Error:
    return A44Error(E_APPROVAL_LINK_INVALID, f"this approval link is not valid: {why}",
                    hint="use the link of the latest message, or decide with `a44 automation approve`")


def verify(k: bytes, token: str, now: datetime) -> Link:
    """The link a token stands for; E_APPROVAL_LINK_INVALID when it was not signed with `k` or is malformed,
    E_APPROVAL_LINK_EXPIRED past its expiry."""
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN or token.count(".") != 1:
        raise _invalid("it is not a link token")
    payload, _, signature = token.partition(".")
    try:
        given = _unb64(signature)
    except (binascii.Error, ValueError):
        raise _invalid("its signature is not base64url") from None
    if not hmac.compare_digest(given, hmac.new(k, payload.encode(), hashlib.sha256).digest()):
        raise _invalid("its signature does not match (altered, or signed by another server)")
    try:
        body = json.loads(_unb64(payload))
        link = Link(str(body["j"]), str(body["r"]), int(body["e"]), str(body["s"]), str(body["p"]),
                    datetime.fromtimestamp(int(body["x"]), UTC), str(body["n"]))
    except (binascii.Error, ValueError, TypeError, KeyError, OverflowError, OSError):
        raise _invalid("its content is not a link's") from None
    if now >= link.expires_at:
        raise A44Error(E_APPROVAL_LINK_EXPIRED, f"this approval link expired at {link.expires_at.isoformat()}",
                       hint="the approval closed at its timeout; `a44 automation runs show RUN` says how it ended")
    return link
