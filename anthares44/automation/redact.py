"""Removing secrets from what is stored (§17): a safety net, not a license to return secrets.

`redact(value)`, by key name: the value of every mapping key whose name is sensitive becomes "[redacted]", at any depth (inside lists too).
A key is sensitive when, compared case-insensitively with `-` and spaces read as `_`:
  * it is one of: password, passwd, token, secret, authorization, api_key, apikey, proxy_authorization,
    cookie, set_cookie, client_secret, private_key; or
  * it ends with `_password`, `_token`, `_secret`, `_api_key` or `_apikey` (access_token, refresh_token,
    db_password, client_secret...), or is camelCase with those endings (accessToken, clientSecret, apiKey).
Keys that merely contain those words elsewhere (`token_type`, `secretRef`, `password_changed_at`) are kept: they
name a secret or describe one, they do not hold one, and hiding them would make results useless for debugging.

`scrub(value, secrets)`, by value: every occurrence of a known secret value (one the secret source handed out, an
OAuth access token an attempt fetched) in any string at any depth, mapping keys too, becomes "[redacted]":
  * a value of 4 characters or more wherever it occurs, inside longer text too;
  * a shorter value (1 to 3 characters) only where it stands alone: the whole string, or a run not touching a
    letter or digit on either side (`"pin 42 ok"` -> `"pin [redacted] ok"`, but `"4242"` and `"v42"` stay), since
    replacing every `4` or `a` would destroy the result while telling an attacker nothing they could not guess.
Numbers, booleans and null are never changed. `secret_parts(value)`: what to scrub once a secret is handed out.

`redact_url(url)`: a database URL without its password, for messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "[redacted]"

EXACT = frozenset({"password", "passwd", "token", "secret", "authorization", "api_key", "apikey",
                   "proxy_authorization", "cookie", "set_cookie", "client_secret", "private_key"})
SUFFIXES = ("_password", "_token", "_secret", "_api_key", "_apikey")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _normal(key: str) -> str:
    """`accessToken` -> `access_token`, `X-Api-Key` -> `x_api_key`."""
    return _CAMEL.sub("_", key).lower().replace("-", "_").replace(" ", "_")


def is_sensitive(key: Any) -> bool:
    if not isinstance(key, str):
        return False
    k = _normal(key)
    return k in EXACT or k.endswith(SUFFIXES)


def redact(value: Any) -> Any:
    """A copy of `value` with the values of sensitive keys replaced by "[redacted]"; other values unchanged."""
    if isinstance(value, dict):
        return {k: (REDACTED if is_sensitive(k) else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


SHORT = 4   # values shorter than this are scrubbed only where they stand alone (module docstring)


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """A copy of `value` with every occurrence of the `secrets` values replaced by "[redacted]" (module docstring)."""
    needles = sorted({s for s in secrets if isinstance(s, str) and s}, key=len, reverse=True)
    if not needles:
        return value
    long = [s for s in needles if len(s) >= SHORT]
    short = [s for s in needles if len(s) < SHORT]
    alone = re.compile(r"(?<![^\W_])(?:" + "|".join(map(re.escape, short)) + r")(?![^\W_])") if short else None

    def one(v: Any) -> Any:
        if isinstance(v, str):
            for s in long:
                if s in v:
                    v = v.replace(s, REDACTED)
            return alone.sub(REDACTED, v) if alone is not None else v
        if isinstance(v, dict):
            return {one(k): one(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [one(x) for x in v]
        return v

    return one(value)


def secret_parts(value: str) -> set[str]:
    """A secret value and, when it is a structured secret (a JSON object), each of its string fields."""
    parts = {value} if value else set()
    try:
        doc = json.loads(value)
    except ValueError:
        return parts
    if isinstance(doc, dict):
        parts.update(v for v in doc.values() if isinstance(v, str) and v)
    return parts


def redact_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
