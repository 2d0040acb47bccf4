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
  * a value of 4 characters or more wherever it occurs, inside longer text too, in the forms a far side echoes it
    (`forms`): as is; JSON-escaped (quotes, slashes, non-ASCII); URL-encoded (`%2F` and `%2f`, `+` for spaces); hex
    (lower and upper case); and base64 and base64url, padded or not, alone or inside a longer encoded text at any
    byte offset, `base64("Bearer <secret>")` or `base64("user:<secret>")` included (the characters that only
    the secret's bytes decide: at least 6 of them, so a secret of 4 or 5 bytes is found in base64 at some offsets
    only);
  * a shorter value (1 to 3 characters) only where it stands alone, as is: the whole string, or a run not touching
    a letter or digit on either side (`"pin 42 ok"` -> `"pin [redacted] ok"`, but `"4242"` and `"v42"` stay), since
    replacing every `4` or `a` would destroy the result while telling an attacker nothing they could not guess.
Numbers, booleans and null are never changed. `secret_parts(value)`: what to scrub once a secret is handed out.
What redaction cannot catch (docs/connectors.md "What redaction cannot catch"): a secret transformed in any other
way (hashed, encrypted, compressed, reversed, split across fields, re-encoded twice, in another character case, a
substring of it); derived values the connector did not `conceal`; bytes a step wrote to its own database or sent
elsewhere; and the encoded edges of a base64 form (a character or two that mix the secret with its neighbours).

`redact_url(url)`: a database URL without its password, for messages.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

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
B64_CORE = 6   # the fewest base64 characters of a secret worth matching: fewer would hit unrelated encoded data
_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def _b64_cores(raw: bytes) -> set[str]:
    """The base64 and base64url characters that `raw` alone decides wherever it stands in a longer encoded text: for
    each byte offset k mod 3 the characters from ceil(8k/6) to floor(8(k+n)/6) of the encoding of k filler bytes
    then `raw`, with and without the padding `raw` gets when it ends the text."""
    out = set()
    n = len(raw)
    for k in range(3):
        full = base64.b64encode(b"\0" * k + raw).decode()
        core = full[-(-8 * k // 6): 8 * (k + n) // 6]
        if len(core) >= B64_CORE:
            out.add(core)
            if k == 0:
                out.add(full)           # the whole encoding, padding included: a value encoded alone
    return out | {c.translate(str.maketrans("+/", "-_")) for c in out}


@lru_cache(maxsize=4096)
def forms(secret: str) -> frozenset[str]:
    """The texts that betray `secret` (module docstring): itself and its JSON-escaped, URL-encoded, hex, base64 and
    base64url forms; only itself when it is shorter than SHORT."""
    if len(secret) < SHORT:
        return frozenset({secret})
    raw = secret.encode("utf-8")
    out = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
           json.dumps(secret)[1:-1].replace("/", "\\/"), quote(secret, safe=""), quote(secret), quote_plus(secret),
           binascii.hexlify(raw).decode(), binascii.hexlify(raw).decode().upper(), *_b64_cores(raw)}
    out |= {_ESCAPE.sub(lambda m: m.group().lower(), f) for f in list(out) if "%" in f}
    return frozenset(f for f in out if len(f) >= SHORT)


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """A copy of `value` with every occurrence of the `secrets` values replaced by "[redacted]" (module docstring)."""
    needles = {s for s in secrets if isinstance(s, str) and s}
    if not needles:
        return value
    # the longest first, so that a form containing another (the padded base64 of a secret, its core) goes whole
    long = sorted({f for s in needles if len(s) >= SHORT for f in forms(s)}, key=len, reverse=True)
    short = sorted((s for s in needles if len(s) < SHORT), key=len, reverse=True)
    anywhere = re.compile("|".join(map(re.escape, long))) if long else None
    alone = re.compile(r"(?<![^\W_])(?:" + "|".join(map(re.escape, short)) + r")(?![^\W_])") if short else None

    def one(v: Any) -> Any:
        if isinstance(v, str):
            if anywhere is not None:
                v = anywhere.sub(REDACTED, v)
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
