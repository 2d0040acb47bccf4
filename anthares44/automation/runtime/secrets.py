"""Secrets (§17): referenced by id (`secretRef: sec_erp_client`), resolved when a connector asks for one during an
attempt, held in memory only, never written to the database, the IR, a result or an error message.

Sources, first match wins:
  1. the environment: `A44_SECRET_<REF IN UPPER CASE>` (`sec_erp_client` -> `A44_SECRET_SEC_ERP_CLIENT`), for
     deployments whose orchestrator injects secrets as variables;
  2. the encrypted file `$A44_HOME/secrets.json` (mode 0600), managed with `a44 automation secrets set|list|rm`.
     Values are encrypted with a key that is not in the database: `A44_SECRET_KEY` (64 hex chars) or the file
     `$A44_HOME/secret.key` (created 0600 on the first `set`). The cipher uses only the standard library:
     HMAC-SHA256 in counter mode as the keystream, then HMAC-SHA256 over nonce and ciphertext (encrypt-then-MAC),
     with separate derived keys; a wrong key or a modified file fails authentication instead of yielding garbage.

Structured secrets are JSON text: `oauth2-client-credentials` takes `{"client_id": ..., "client_secret": ...}`,
`bot/invoke` `{"baseUrl": ..., "apiKey": ...}` (or just the key, with the connector's `baseUrl`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets as _random
from pathlib import Path
from typing import Iterable

from ..errors import E_SECRET_NOT_FOUND, A44Error

SECRET_REF = re.compile(r"^sec_[A-Za-z0-9_]+$")
ENV_PREFIX = "A44_SECRET_"
KEY_ENV = "A44_SECRET_KEY"
FILE_VERSION = 1


def _home() -> Path:
    from .database import a44_home

    return a44_home()


def env_name(ref: str) -> str:
    return ENV_PREFIX + ref.upper()


def check_ref(ref: str) -> str:
    if not isinstance(ref, str) or not SECRET_REF.match(ref):
        raise A44Error(E_SECRET_NOT_FOUND, f"{str(ref)[:80]!r} is not a secret reference (sec_ followed by "
                                          f"letters, digits or _)")
    return ref


# -- the cipher ----------------------------------------------------------------------------------------------------
def _subkeys(key: bytes) -> tuple[bytes, bytes]:
    return (hmac.new(key, b"a44 secrets enc v1", hashlib.sha256).digest(),
            hmac.new(key, b"a44 secrets mac v1", hashlib.sha256).digest())


def _keystream(enc_key: bytes, nonce: bytes, n: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hmac.new(enc_key, nonce + counter.to_bytes(8, "big"), hashlib.sha256).digest()
        counter += 1
    return bytes(out[:n])


def encrypt(key: bytes, plaintext: bytes, associated: bytes = b"") -> str:
    enc_key, mac_key = _subkeys(key)
    nonce = _random.token_bytes(16)
    ct = bytes(a ^ b for a, b in zip(plaintext, _keystream(enc_key, nonce, len(plaintext))))
    tag = hmac.new(mac_key, associated + b"\0" + nonce + ct, hashlib.sha256).digest()
    return base64.b64encode(nonce + ct + tag).decode("ascii")


def decrypt(key: bytes, token: str, associated: bytes = b"") -> bytes:
    enc_key, mac_key = _subkeys(key)
    raw = base64.b64decode(token.encode("ascii"), validate=True)
    if len(raw) < 48:
        raise ValueError("ciphertext too short")
    nonce, ct, tag = raw[:16], raw[16:-32], raw[-32:]
    if not hmac.compare_digest(tag, hmac.new(mac_key, associated + b"\0" + nonce + ct, hashlib.sha256).digest()):
        raise ValueError("authentication failed (wrong key or modified file)")
    return bytes(a ^ b for a, b in zip(ct, _keystream(enc_key, nonce, len(ct))))


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    tmp.replace(path)


# -- the file ------------------------------------------------------------------------------------------------------
class SecretFile:
    """`$A44_HOME/secrets.json`: {"version": 1, "secrets": {ref: ciphertext}}; the key lives elsewhere."""

    def __init__(self, home: Path | None = None):
        self.home = Path(home) if home is not None else _home()
        self.path = self.home / "secrets.json"
        self.key_path = self.home / "secret.key"

    def key(self, *, create: bool = False) -> bytes | None:
        env = os.environ.get(KEY_ENV)
        if env:
            try:
                key = bytes.fromhex(env.strip())
            except ValueError:
                raise A44Error(E_SECRET_NOT_FOUND, f"{KEY_ENV} must be 64 hexadecimal characters") from None
            if len(key) < 32:
                raise A44Error(E_SECRET_NOT_FOUND, f"{KEY_ENV} must be 64 hexadecimal characters")
            return key
        if self.key_path.exists():
            return bytes.fromhex(self.key_path.read_text().strip())
        if not create:
            return None
        key = _random.token_bytes(32)
        _write_private(self.key_path, key.hex().encode() + b"\n")
        return key

    def _load(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
        doc = json.loads(self.path.read_text(encoding="utf-8"))
        return dict(doc.get("secrets") or {})

    def names(self) -> list[str]:
        return sorted(self._load())

    def get(self, ref: str) -> str | None:
        token = self._load().get(ref)
        if token is None:
            return None
        key = self.key()
        if key is None:
            raise A44Error(E_SECRET_NOT_FOUND, f"secret {ref} is stored encrypted but no key is available "
                                               f"({KEY_ENV} or {self.key_path})")
        try:
            return decrypt(key, token, ref.encode()).decode("utf-8")
        except ValueError as exc:
            raise A44Error(E_SECRET_NOT_FOUND, f"secret {ref} cannot be decrypted: {exc}") from None

    def set(self, ref: str, value: str) -> None:
        check_ref(ref)
        key = self.key(create=True)
        current = self._load()
        current[ref] = encrypt(key, value.encode("utf-8"), ref.encode())
        _write_private(self.path, json.dumps({"version": FILE_VERSION, "secrets": current}, indent=1).encode())

    def remove(self, ref: str) -> bool:
        current = self._load()
        if ref not in current:
            return False
        del current[ref]
        _write_private(self.path, json.dumps({"version": FILE_VERSION, "secrets": current}, indent=1).encode())
        return True


# -- what connectors call -----------------------------------------------------------------------------------------
class SecretSource:
    """`await source(ref)` -> the value. Environment first, then the encrypted file; a static mapping (tests,
    embedders) first of all. Remembers which values it handed out so they can be scrubbed from anything a
    connector returns or raises (`scrub`)."""

    def __init__(self, static: dict[str, str] | None = None, *, home: Path | None = None, use_env: bool = True):
        self._static = dict(static or {})
        self._file = SecretFile(home)
        self._use_env = use_env
        self._handed_out: set[str] = set()

    async def __call__(self, ref: str) -> str:
        return self.get(ref)

    def get(self, ref: str) -> str:
        check_ref(ref)
        value = self._static.get(ref)
        if value is None and self._use_env:
            value = os.environ.get(env_name(ref))
        if value is None:
            value = self._file.get(ref)
        if value is None:
            raise A44Error(E_SECRET_NOT_FOUND, f"secret {ref} is not defined",
                           hint=f"`a44 automation secrets set {ref}` (value on stdin) or set {env_name(ref)}")
        self._remember(value)
        return value

    def _remember(self, value: str) -> None:
        if len(value) >= 4:
            self._handed_out.add(value)
        # the parts of a structured secret are secrets too
        try:
            doc = json.loads(value)
        except ValueError:
            return
        if isinstance(doc, dict):
            for v in doc.values():
                if isinstance(v, str) and len(v) >= 4:
                    self._handed_out.add(v)

    def values(self) -> Iterable[str]:
        return tuple(self._handed_out)


def scrub(value, secrets_: Iterable[str]):
    """`value` with every occurrence of a secret value (in any string, at any depth, keys too) replaced by
    "[redacted]". The last line of defence after key-based redaction (runtime/redact.py)."""
    needles = sorted({s for s in secrets_ if s}, key=len, reverse=True)
    if not needles:
        return value

    def one(v):
        if isinstance(v, str):
            for s in needles:
                if s in v:
                    v = v.replace(s, "[redacted]")
            return v
        if isinstance(v, dict):
            return {one(k): one(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [one(x) for x in v]
        return v

    return one(value)
