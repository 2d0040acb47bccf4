"""Redaction of step results before they are stored (§17): a safety net, not a license to return secrets.

The value of every mapping key whose name is sensitive becomes "[redacted]", at any depth (inside lists too).
A key is sensitive when, compared case-insensitively with `-` and spaces read as `_`:
  * it is one of: password, passwd, token, secret, authorization, api_key, apikey, proxy_authorization,
    cookie, set_cookie, client_secret, private_key; or
  * it ends with `_password`, `_token`, `_secret`, `_api_key` or `_apikey` (access_token, refresh_token,
    db_password, client_secret...), or is camelCase with those endings (accessToken, clientSecret, apiKey).
Keys that merely contain those words elsewhere (`token_type`, `secretRef`, `password_changed_at`) are kept: they
name a secret or describe one, they do not hold one, and hiding them would make results useless for debugging.
"""

from __future__ import annotations

import re
from typing import Any

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
