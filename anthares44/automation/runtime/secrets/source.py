"""Secrets (§17): referenced by id (`secretRef: sec_erp_client`), resolved when a connector asks for one during an
attempt, held in memory only, never written to the database, the IR, a result or an error message.

Sources, first match wins:
  1. the environment: `A44_SECRET_<REF IN UPPER CASE>` (`sec_erp_client` -> `A44_SECRET_SEC_ERP_CLIENT`), for
     deployments whose orchestrator injects secrets as variables;
  2. the encrypted file `$A44_HOME/secrets.json` (secret_file.py: AES-256-GCM, key outside the database),
     managed with `a44 automation secrets set|list|rm|rotate-key`.

Structured secrets are JSON text: `oauth2-client-credentials` takes `{"client_id": ..., "client_secret": ...}`,
`bot/invoke` `{"baseUrl": ..., "apiKey": ...}` (or just the key, with the connector's `baseUrl`). Every value
handed out, and each string field of a structured one, is remembered so `registry.call` can scrub it
(redact.scrub) from whatever a connector returns or raises.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ...errors import E_SECRET_NOT_FOUND, A44Error
from ...redact import secret_parts
from .file import SecretFile, check_ref

ENV_PREFIX = "A44_SECRET_"


def env_name(ref: str) -> str:
    return ENV_PREFIX + ref.upper()


class SecretSource:
    """`await source(ref)` -> the value. Environment first, then the encrypted `file` (`SecretFile.of(settings)`,
    None: none); a static mapping (tests, embedders) first of all. Remembers which values it handed out so they can be scrubbed from anything a
    connector returns or raises (redact.scrub)."""

    def __init__(self, static: dict[str, str] | None = None, *, file: SecretFile | None = None,
                 use_env: bool = True):
        self._static = dict(static or {})
        self._file = file
        self._use_env = use_env
        self._handed_out: set[str] = set()

    async def __call__(self, ref: str) -> str:
        return self.get(ref)

    def get(self, ref: str) -> str:
        check_ref(ref)
        value = self._static.get(ref)
        if value is None and self._use_env:
            value = os.environ.get(env_name(ref))
        if value is None and self._file is not None:
            value = self._file.get(ref)
        if value is None:
            raise A44Error(E_SECRET_NOT_FOUND, f"secret {ref} is not defined",
                           hint=f"`a44 automation secrets set {ref}` (value on stdin) or set {env_name(ref)}")
        self._handed_out |= secret_parts(value)
        return value

    def values(self) -> Iterable[str]:
        return tuple(self._handed_out)
