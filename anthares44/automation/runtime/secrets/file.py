"""`$A44_HOME/secrets.json`, the encrypted secret file, and its keys: reading, writing under a lock, migrating,
rotating (docs/connectors.md "Secrets").

The file: `{"format": 2, "secrets": {ref: {"kid", "nonce", "ct"}}}` (secret_cipher.py). A file of format 1
(`{"version": 1, "secrets": {ref: token}}`) is still read, and the next write turns it into format 2.

The current key: `A44_SECRET_KEY` (hex; `SecretFile(home, key=...)`, the value the edge read from its settings),
else the file `$A44_HOME/secret.key` (hex, created 0600 by the first `set`). Keys replaced by `rotate_key` stay next to it as `secret.key.<kid>.old`, so entries still sealed with one
(a rotation interrupted between its two renames) remain readable; together they are the keyring, looked up by
the key id each entry carries. A key file that group or others may access is refused, as is a key under 32 bytes.

Every write (set, rm, rotate) holds an exclusive `flock` on `secrets.json.lock`, re-reads the file, decrypts every
entry with the keyring and refuses (E_SECRET_KEY_MISMATCH, nothing written) if one does not decrypt, so a wrong
key can never produce a file whose entries need two different keys, and concurrent writers never lose an entry.
The new file is written to a temporary file, fsynced and renamed over the old one; readers take a shared lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from ...errors import (
    E_INVALID_ARGUMENT,
    E_SECRET_FILE_INVALID,
    E_SECRET_KEY_MISMATCH,
    E_SECRET_KEY_PERMISSIONS,
    E_SECRET_NOT_FOUND,
    A44Error,
)
from ...paths import a44_home
from ...settings import Settings
from .cipher import Undecryptable, key_id, load_cipher, new_key, open_entry, open_v1, parse_key, seal

SECRET_REF = re.compile(r"^sec_[A-Za-z0-9_]+$")


def check_ref(ref: str) -> str:
    if not isinstance(ref, str) or not SECRET_REF.match(ref):
        raise A44Error(E_SECRET_NOT_FOUND, f"{str(ref)[:80]!r} is not a secret reference (sec_ followed by "
                                          f"letters, digits or _)")
    return ref


FORMAT = 2
KEY_VARIABLE = "A44_SECRET_KEY"    # named in messages: where the key given as `key` comes from


def write_private(path: Path, data: bytes) -> None:
    """`data` at `path`, mode 0600, atomically: temporary file, fsync, rename, fsync of the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_key_file(path: Path) -> bytes:
    """The key in `path`, refused when group or others have any permission on the file."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        raise A44Error(E_SECRET_KEY_PERMISSIONS, f"the secret key file {path} has mode {mode:04o}: group or "
                                                 f"others may access it", hint=f"chmod 600 {path}")
    return parse_key(path.read_text(encoding="ascii", errors="replace"), str(path))


class SecretFile:
    def __init__(self, home: Path, *, key: str | None = None):
        self.home = Path(home)
        self._key = key or None        # A44_SECRET_KEY (hex), read by the edge
        self.path = self.home / "secrets.json"
        self.key_path = self.home / "secret.key"
        self.lock_path = self.home / "secrets.json.lock"

    @classmethod
    def of(cls, settings: Settings) -> SecretFile:
        """The secret file of `settings`' home, with its A44_SECRET_KEY."""
        return cls(a44_home(settings.home), key=settings.secret_key)

    # -- keys -----------------------------------------------------------------------------------------------------
    def current_key(self) -> bytes | None:
        if self._key:
            return parse_key(self._key, KEY_VARIABLE)
        if self.key_path.exists():
            return read_key_file(self.key_path)
        return None

    def keyring(self) -> dict[str, bytes]:
        """kid -> key: the current key and the ones it replaced."""
        keys = {}
        for old in sorted(self.home.glob("secret.key.*.old")):
            key = read_key_file(old)
            keys[key_id(key)] = key
        current = self.current_key()
        if current is not None:
            keys[key_id(current)] = current
        return keys

    # -- reading --------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        load_cipher()       # cryptography is imported lazily: not while other processes queue on the lock
        if exclusive:
            self.home.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            if exclusive:
                raise
            fd = None  # a read-only home: no writer can run there either, so there is nothing to wait for
        if fd is None:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _read(self) -> tuple[int, dict]:
        """(format, {ref: entry}) of the file as it is; an absent file is an empty format 2 file."""
        if not self.path.exists():
            return FORMAT, {}
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise A44Error(E_SECRET_FILE_INVALID, f"{self.path} is not JSON: {exc}") from None
        if isinstance(doc, dict) and isinstance(doc.get("secrets"), dict):
            if doc.get("format") == FORMAT:
                return FORMAT, doc["secrets"]
            if "format" not in doc and doc.get("version") == 1:
                return 1, doc["secrets"]
        raise A44Error(E_SECRET_FILE_INVALID, f"{self.path} is not a secret file of format 1 or {FORMAT}")

    @staticmethod
    def _open(fmt: int, keys: dict[str, bytes], entry, ref: str) -> str:
        if fmt == FORMAT:
            return open_entry(keys, entry, ref).decode("utf-8")
        failures = []
        for key in keys.values():
            try:
                return open_v1(key, entry, ref).decode("utf-8")
            except Undecryptable as exc:
                failures.append(str(exc))
        raise Undecryptable(failures[-1] if failures else "format 1 entry and no key available")

    def names(self) -> list[str]:
        with self._locked(False):
            return sorted(self._read()[1])

    def get(self, ref: str) -> str | None:
        with self._locked(False):
            fmt, entries = self._read()
            if ref not in entries:
                return None
            keys = self.keyring()
        try:
            return self._open(fmt, keys, entries[ref], ref)
        except Undecryptable as exc:
            raise A44Error(E_SECRET_KEY_MISMATCH, f"secret {ref} in {self.path} cannot be decrypted: {exc}",
                           hint=f"the key that sealed it must be in {KEY_VARIABLE}, {self.key_path} or a "
                                f"{self.key_path.name}.<kid>.old file") from None

    # -- writing --------------------------------------------------------------------------------------------------
    def _decrypt_all(self, fmt: int, entries: dict, keys: dict[str, bytes]) -> dict[str, str]:
        plain = {}
        for ref, entry in entries.items():
            try:
                plain[ref] = self._open(fmt, keys, entry, ref)
            except Undecryptable as exc:
                raise A44Error(E_SECRET_KEY_MISMATCH,
                               f"refusing to write {self.path}: the stored secret {ref} cannot be decrypted with "
                               f"the available keys ({exc}); nothing was changed",
                               hint=f"use the key that wrote the file ({KEY_VARIABLE} or {self.key_path})") from None
        return plain

    def _rewrite(self, change: Callable[[dict[str, str]], object]):
        """Under the lock: every entry decrypted, `change(plain)` applied, every entry sealed again with the
        current key (created on first use) and the file replaced. Returns what `change` returned."""
        with self._locked(True):
            fmt, entries = self._read()
            plain = self._decrypt_all(fmt, entries, self.keyring())
            key = self.current_key()
            if key is None:
                key = new_key()
                write_private(self.key_path, key.hex().encode() + b"\n")
            out = change(plain)
            self._write(plain, key)
            return out

    def _write(self, plain: dict[str, str], key: bytes) -> None:
        sealed = {ref: seal(key, value.encode("utf-8"), ref) for ref, value in sorted(plain.items())}
        write_private(self.path, json.dumps({"format": FORMAT, "secrets": sealed}, indent=1).encode())

    def set(self, ref: str, value: str) -> None:
        check_ref(ref)
        self._rewrite(lambda plain: plain.__setitem__(ref, value))

    def remove(self, ref: str) -> bool:
        return bool(self._rewrite(lambda plain: plain.pop(ref, None) is not None))

    def rotate_key(self, new: bytes | None = None) -> dict:
        """Every entry sealed again with `new` (default: a fresh random key), which becomes `secret.key`; the
        replaced key is kept as `secret.key.<kid>.old`. Returns {old_kid, new_kid, backup, entries}."""
        if self._key:
            raise A44Error(E_INVALID_ARGUMENT, f"the current key comes from {KEY_VARIABLE}; rotate-key manages "
                                               f"{self.key_path} only",
                           hint=f"unset {KEY_VARIABLE} to rotate the file key, or re-set the secrets with a new "
                                f"{KEY_VARIABLE}")
        new = new if new is not None else new_key()
        with self._locked(True):
            fmt, entries = self._read()
            plain = self._decrypt_all(fmt, entries, self.keyring())
            old = self.current_key()
            if old == new:
                raise A44Error(E_INVALID_ARGUMENT, "the new key is the current key")
            backup = None
            if old is not None:
                backup = self.home / f"{self.key_path.name}.{key_id(old)}.old"
                write_private(backup, old.hex().encode() + b"\n")
            # key first: if the process dies before the file is replaced, the old entries name the old key id,
            # which the backup still provides
            write_private(self.key_path, new.hex().encode() + b"\n")
            self._write(plain, new)
        return {"old_kid": key_id(old) if old is not None else None, "new_kid": key_id(new),
                "backup": str(backup) if backup else None, "entries": len(plain)}
