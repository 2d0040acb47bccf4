"""The secret file (runtime/secrets/file.py): format 2 on disk, a format 1 file read and migrated, the refusals
(short key, key file open to group/others, a key that cannot decrypt what is stored), 20 concurrent
`a44 automation secrets set` processes, and `rotate-key` end to end through the CLI."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from anthares44.automation.errors import E_SECRET_KEY_MISMATCH, E_SECRET_KEY_PERMISSIONS, E_SECRET_KEY_SHORT, A44Error
from anthares44.automation.runtime.secrets.cipher import Undecryptable, key_id, open_entry
from anthares44.automation.runtime.secrets.file import SecretFile

A44 = str(Path(sys.executable).with_name("a44"))


@pytest.fixture
def home(tmp_path):
    return tmp_path


def cli(home: Path, *args: str, stdin: str = "", env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "A44_SECRET_KEY"} | {"A44_HOME": str(home)} | (env or {})
    return subprocess.run([A44, "automation", "secrets", *args], input=stdin, capture_output=True, text=True,
                          env=full, timeout=60)


def v1_token(key: bytes, plaintext: bytes, ref: str) -> str:
    """A format 1 entry exactly as the stdlib cipher wrote it (HMAC-SHA256 CTR keystream, encrypt-then-MAC)."""
    enc = hmac.new(key, b"a44 secrets enc v1", hashlib.sha256).digest()
    mac = hmac.new(key, b"a44 secrets mac v1", hashlib.sha256).digest()
    nonce = secrets.token_bytes(16)
    stream = b"".join(hmac.new(enc, nonce + i.to_bytes(8, "big"), hashlib.sha256).digest()
                      for i in range(len(plaintext) // 32 + 1))
    ct = bytes(a ^ b for a, b in zip(plaintext, stream))
    tag = hmac.new(mac, ref.encode() + b"\0" + nonce + ct, hashlib.sha256).digest()
    return base64.b64encode(nonce + ct + tag).decode()


def test_format_2_on_disk_entries_bound_to_their_name(home):
    f = SecretFile(home)
    f.set("sec_a", "alpha-value")
    f.set("sec_b", "beta-value")
    doc = json.loads(f.path.read_text())
    key = bytes.fromhex(f.key_path.read_text())
    assert doc["format"] == 2 and set(doc["secrets"]) == {"sec_a", "sec_b"}
    assert {e["kid"] for e in doc["secrets"].values()} == {key_id(key)}
    assert b"alpha" not in f.path.read_bytes()
    doc["secrets"]["sec_a"], doc["secrets"]["sec_b"] = doc["secrets"]["sec_b"], doc["secrets"]["sec_a"]
    f.path.write_text(json.dumps(doc))                # entries swapped between names: both refuse to decrypt
    for ref in ("sec_a", "sec_b"):
        with pytest.raises(A44Error) as exc:
            f.get(ref)
        assert exc.value.code == E_SECRET_KEY_MISMATCH


def test_a_format_1_file_is_read_then_migrated_by_the_next_write(home):
    key = os.urandom(32)
    f = SecretFile(home)
    f.key_path.write_text(key.hex() + "\n")
    f.key_path.chmod(0o600)
    f.path.write_text(json.dumps({"version": 1, "secrets": {
        "sec_old": v1_token(key, b"legacy-value", "sec_old"),
        "sec_json": v1_token(key, json.dumps({"client_id": "c", "client_secret": "s" * 40}).encode(), "sec_json")}}))
    assert f.get("sec_old") == "legacy-value" and json.loads(f.get("sec_json"))["client_secret"] == "s" * 40
    f.set("sec_new", "fresh")
    doc = json.loads(f.path.read_text())
    assert doc["format"] == 2 and "version" not in doc and set(doc["secrets"]) == {"sec_old", "sec_json", "sec_new"}
    assert all(isinstance(e, dict) and e["kid"] == key_id(key) for e in doc["secrets"].values())
    assert (f.get("sec_old"), f.get("sec_new")) == ("legacy-value", "fresh")


def test_a_short_key_is_refused(home):
    with pytest.raises(A44Error) as exc:
        SecretFile(home, key=os.urandom(16).hex()).set("sec_a", "x")
    assert exc.value.code == E_SECRET_KEY_SHORT and "16 bytes" in exc.value.message
    f = SecretFile(home)
    f.key_path.write_text(os.urandom(31).hex())
    f.key_path.chmod(0o600)
    with pytest.raises(A44Error) as exc:
        f.set("sec_a", "x")
    assert exc.value.code == E_SECRET_KEY_SHORT and not f.path.exists()
    r = cli(home, "set", "sec_a", stdin="x")          # the CLI: the code and message, no traceback
    assert r.returncode == 1 and "E_SECRET_KEY_SHORT" in r.stderr and "Traceback" not in r.stderr


def test_a_key_file_open_to_group_or_others_is_refused_with_the_fix(home):
    f = SecretFile(home)
    f.set("sec_a", "alpha-value")
    for mode in (0o640, 0o604):
        f.key_path.chmod(mode)
        with pytest.raises(A44Error) as exc:
            f.get("sec_a")
        assert exc.value.code == E_SECRET_KEY_PERMISSIONS and exc.value.hint == f"chmod 600 {f.key_path}"
    r = cli(home, "set", "sec_b", stdin="beta")
    assert r.returncode == 1 and "E_SECRET_KEY_PERMISSIONS" in r.stderr and "chmod 600" in r.stderr
    f.key_path.chmod(0o600)
    assert f.get("sec_a") == "alpha-value" and f.names() == ["sec_a"]


def test_writing_with_a_key_that_cannot_decrypt_the_file_is_refused_and_loses_nothing(home):
    f = SecretFile(home)
    f.set("sec_a", "alpha-value")
    before = f.path.read_bytes()
    other = SecretFile(home, key=os.urandom(32).hex())              # another key (A44_SECRET_KEY)
    for write in (lambda: other.set("sec_b", "beta"), lambda: other.remove("sec_a")):
        with pytest.raises(A44Error) as exc:
            write()
        assert exc.value.code == E_SECRET_KEY_MISMATCH and "nothing was changed" in exc.value.message
    key_file = f.key_path.read_bytes()
    f.key_path.unlink()                                              # the key lost: no new key is made up either
    with pytest.raises(A44Error) as exc:
        f.set("sec_b", "beta")
    assert exc.value.code == E_SECRET_KEY_MISMATCH and not f.key_path.exists()
    assert f.path.read_bytes() == before
    f.key_path.write_bytes(key_file)
    f.key_path.chmod(0o600)
    assert f.get("sec_a") == "alpha-value"


def test_twenty_concurrent_cli_sets_keep_all_twenty(home):
    procs = [subprocess.Popen([A44, "automation", "secrets", "set", f"sec_n{i}"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, "A44_HOME": str(home)}) for i in range(20)]
    for i, p in enumerate(procs):
        p.stdin.write(f"value-{i}".encode())
        p.stdin.close()
    assert [p.wait(timeout=60) for p in procs] == [0] * 20, [p.stderr.read() for p in procs]
    f = SecretFile(home)
    assert f.names() == sorted(f"sec_n{i}" for i in range(20))
    assert all(f.get(f"sec_n{i}") == f"value-{i}" for i in range(20))


def test_rotate_key_through_the_cli(home):
    for i in range(3):
        assert cli(home, "set", f"sec_r{i}", stdin=f"rotated-value-{i}").returncode == 0
    f = SecretFile(home)
    old = bytes.fromhex(f.key_path.read_text())
    r = cli(home, "rotate-key")
    assert r.returncode == 0, r.stderr
    new = bytes.fromhex(f.key_path.read_text())
    backup = home / f"secret.key.{key_id(old)}.old"
    assert new != old and str(backup) in r.stderr and bytes.fromhex(backup.read_text()) == old
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600 and stat.S_IMODE(os.stat(f.key_path).st_mode) == 0o600
    doc = json.loads(f.path.read_text())
    assert {e["kid"] for e in doc["secrets"].values()} == {key_id(new)}
    for ref, entry in doc["secrets"].items():
        with pytest.raises(Undecryptable):                          # the old key opens nothing any more
            open_entry({entry["kid"]: old}, entry, ref)
        assert open_entry({entry["kid"]: new}, entry, ref).decode() == f"rotated-value-{ref[-1]}"
    # old key from the environment: refused for writing, file unchanged
    r = cli(home, "set", "sec_x", stdin="x", env={"A44_SECRET_KEY": old.hex()})
    assert r.returncode == 1 and "E_SECRET_KEY_MISMATCH" in r.stderr and "sec_x" not in f.path.read_text()
    # a given key (file), then the verbs still work
    given = home / "next.key"
    given.write_text(os.urandom(32).hex())
    assert cli(home, "rotate-key", "--key-file", str(given)).returncode == 0
    assert f.key_path.read_text().strip() == given.read_text() and len(list(home.glob("secret.key.*.old"))) == 2
    short = cli(home, "rotate-key", "--key-stdin", stdin="abcd")
    assert short.returncode == 1 and "E_SECRET_KEY_SHORT" in short.stderr
    assert [f.get(f"sec_r{i}") for i in range(3)] == [f"rotated-value-{i}" for i in range(3)]


def test_an_interrupted_rotation_leaves_a_readable_file(home):
    """The new key is in place but the file still holds entries of the old one (the process died between the two
    renames): the old key's backup, found by the entries' key id, still opens them, and the next write migrates."""
    f = SecretFile(home)
    f.set("sec_a", "alpha-value")
    old = bytes.fromhex(f.key_path.read_text())
    (home / f"secret.key.{key_id(old)}.old").write_text(old.hex())
    (home / f"secret.key.{key_id(old)}.old").chmod(0o600)
    f.key_path.write_text(os.urandom(32).hex())
    assert f.get("sec_a") == "alpha-value"
    f.set("sec_b", "beta")
    new = bytes.fromhex(f.key_path.read_text())
    assert {e["kid"] for e in json.loads(f.path.read_text())["secrets"].values()} == {key_id(new)}
