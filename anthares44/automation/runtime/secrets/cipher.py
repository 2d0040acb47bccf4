"""The cipher of the secret file: AES-256-GCM from the `cryptography` package, the secret's reference as associated
data, so an entry copied under another name fails authentication instead of decrypting.

A key is at least 32 random bytes, written as hexadecimal. The AES key is derived from it with HKDF-SHA256 (so the
same key material never serves two algorithms: the format 1 reader below uses it raw). Each entry names the key it
was sealed with by its key id: the first 6 bytes of SHA-256 of the key, in hex, which tells keys apart during a
rotation without revealing anything useful about them.

`open_v1` reads entries of the format 1 file (HMAC-SHA256 counter-mode keystream + HMAC-SHA256 tag over
associated data, nonce and ciphertext, written before this module existed); nothing writes that format any more.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import TYPE_CHECKING

from ...errors import E_SECRET_KEY_SHORT, A44Error

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MIN_KEY_BYTES = 32
NONCE_BYTES = 12


class Undecryptable(ValueError):
    """Wrong key, unknown key id, or a modified entry."""


def parse_key(text: str, origin: str) -> bytes:
    """The key written as hex in `origin` (a variable or a file), refused when shorter than 32 bytes."""
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise A44Error(E_SECRET_KEY_SHORT, f"the secret key in {origin} is not hexadecimal",
                       hint="a key is 64 hexadecimal characters (32 random bytes): `openssl rand -hex 32`") from None
    if len(key) < MIN_KEY_BYTES:
        raise A44Error(E_SECRET_KEY_SHORT, f"the secret key in {origin} has {len(key)} bytes; at least "
                                           f"{MIN_KEY_BYTES} are required",
                       hint="a key is 64 hexadecimal characters (32 random bytes): `openssl rand -hex 32`")
    return key


def new_key() -> bytes:
    return os.urandom(MIN_KEY_BYTES)


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).digest()[:6].hex()


def load_cipher() -> None:
    """Import cryptography now (a caller about to hold a lock that other processes wait on)."""
    import cryptography.exceptions  # noqa: F401
    import cryptography.hazmat.primitives.ciphers.aead  # noqa: F401
    import cryptography.hazmat.primitives.kdf.hkdf  # noqa: F401


def _aead(key: bytes) -> AESGCM:
    # cryptography (~7 MB resident) on the first secret sealed or opened, not in every daemon at start (issue 32)
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"a44 secrets v2 aes-256-gcm").derive(key)
    return AESGCM(derived)


def seal(key: bytes, plaintext: bytes, ref: str) -> dict[str, str]:
    """One format 2 entry: {"kid", "nonce", "ct"} (ciphertext with its 16-byte tag, base64)."""
    nonce = os.urandom(NONCE_BYTES)
    ct = _aead(key).encrypt(nonce, plaintext, ref.encode())
    return {"kid": key_id(key), "nonce": base64.b64encode(nonce).decode("ascii"),
            "ct": base64.b64encode(ct).decode("ascii")}


def open_entry(keys: dict[str, bytes], entry: dict, ref: str) -> bytes:
    """The plaintext of a format 2 entry, with the key its id names among `keys` (kid -> key)."""
    try:
        kid, nonce, ct = entry["kid"], base64.b64decode(entry["nonce"]), base64.b64decode(entry["ct"])
    except (KeyError, TypeError, ValueError):
        raise Undecryptable("malformed entry") from None
    key = keys.get(kid)
    if key is None:
        raise Undecryptable(f"sealed with key {kid}, which is not available (known: {', '.join(keys) or 'none'})")
    aead = _aead(key)
    from cryptography.exceptions import InvalidTag

    try:
        return aead.decrypt(nonce, ct, ref.encode())
    except InvalidTag:
        raise Undecryptable(f"authentication failed under key {kid} (modified entry)") from None


# -- format 1, read only ------------------------------------------------------------------------------------------
def _v1_keystream(enc_key: bytes, nonce: bytes, n: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hmac.new(enc_key, nonce + counter.to_bytes(8, "big"), hashlib.sha256).digest()
        counter += 1
    return bytes(out[:n])


def open_v1(key: bytes, token: str, ref: str) -> bytes:
    enc_key = hmac.new(key, b"a44 secrets enc v1", hashlib.sha256).digest()
    mac_key = hmac.new(key, b"a44 secrets mac v1", hashlib.sha256).digest()
    try:
        raw = base64.b64decode(token.encode("ascii"), validate=True)
    except (AttributeError, ValueError):
        raise Undecryptable("malformed format 1 entry") from None
    if len(raw) < 48:
        raise Undecryptable("format 1 entry too short")
    nonce, ct, tag = raw[:16], raw[16:-32], raw[-32:]
    if not hmac.compare_digest(tag, hmac.new(mac_key, ref.encode() + b"\0" + nonce + ct, hashlib.sha256).digest()):
        raise Undecryptable("authentication failed (wrong key or modified format 1 entry)")
    return bytes(a ^ b for a, b in zip(ct, _v1_keystream(enc_key, nonce, len(ct))))
