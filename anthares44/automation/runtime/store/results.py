"""Step results: inline in the attempt row up to 256 KB of JSON, otherwise an object of the project's object store
(the one `storage/put` writes to) whose `a44-storage://<project>/<key>` URI the row keeps (§7.4).

The object is written (atomically, by the store: temp file + rename for the local one) before the row that
references it, so a reference never points at nothing; a crash between the two leaves an orphan object, which is
harmless. Keys live under the reserved prefix `_results/` of the project (`storage/put` refuses to write there):

    _results/<run_id>/<step_id>/e<epoch>-<kind>-a<attempt>.json

Any `ObjectStore` (stdlib_connectors/storage.py: the local directory `$A44_HOME/storage` by default, or an
S3-compatible backend) serves both `storage/*` steps and large results. References written before this, `file://`
URIs of files under `$A44_HOME/results`, are still read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ...errors import E_RESULT_TOO_LARGE, A44Error
from ...jsonenc import holds_nul

MAX_INLINE_BYTES = 256 * 1024
RESULTS_PREFIX = "_results"          # reserved key prefix of large step results in every project's object store
STORAGE_SCHEME = "a44-storage"
_KEY_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


@dataclass(frozen=True)
class StoredResult:
    inline: str | None  # JSON text for the jsonb column
    ref: str | None  # a44-storage:// URI (file:// in rows written by older versions)
    size: int | None  # bytes of the JSON text


def encode_json(value: Any) -> str:
    """Compact JSON; what we store and what we count against the 256 KB limit."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise A44Error(E_RESULT_TOO_LARGE, f"the value is not JSON-serialisable: {exc}") from None


def check_storable(value: Any) -> None:
    """E_RESULT_TOO_LARGE when `value` cannot go into a jsonb column: not JSON, or a string holding U+0000."""
    if holds_nul(encode_json(value)):
        raise A44Error(E_RESULT_TOO_LARGE, "the value holds the character U+0000, which PostgreSQL cannot store")


def key_segment(part: str) -> str:
    """`part` as one storage key segment, reversibly: letters, digits, `_` and `-` stay; anything else (and a
    leading `.`) becomes `=XX` per UTF-8 byte. Step ids of code workflows (`ctx.random#1`) need it."""
    out = []
    for i, ch in enumerate(str(part)):
        if ch in _KEY_SAFE and not (ch == "." and i == 0):
            out.append(ch)
        else:
            out.extend(f"={b:02X}" for b in ch.encode("utf-8"))
    return "".join(out) or "=00"


def result_key(run_id: str, step_id: str, epoch: int, kind: str, attempt: int) -> str:
    return (f"{RESULTS_PREFIX}/{key_segment(run_id)}/{key_segment(step_id)}/"
            f"e{int(epoch)}-{key_segment(kind)}-a{int(attempt)}.json")


class ResultFiles:
    """Where results too large for a row go: the project's object store (`storage` if given, else a
    `LocalObjectStore` rooted at `root`, which the edge derives from its settings (paths.storage_root), else at
    the default home's)."""

    def __init__(self, root: Path | None = None, *, storage: Any = None):
        if storage is None:
            from ...paths import storage_root
            from ...stdlib_connectors.storage import LocalObjectStore

            storage = LocalObjectStore(Path(root) if root is not None else storage_root(None))
        self.storage = storage

    def store(self, value: Any, *, project_id: str, run_id: str, step_id: str, epoch: int, kind: str,
              attempt: int) -> StoredResult:
        if value is None:
            return StoredResult(None, None, None)
        text = encode_json(value)
        data = text.encode("utf-8")
        if len(data) <= MAX_INLINE_BYTES:
            return StoredResult(text, None, len(data))
        key = result_key(run_id, step_id, epoch, kind, attempt)
        try:
            info = self.storage.put(project_id, key, data, "application/json")
        except A44Error as exc:
            raise A44Error(E_RESULT_TOO_LARGE, f"the result of step {step_id} is {len(data)} bytes (more than "
                                               f"{MAX_INLINE_BYTES}) and could not be stored as {project_id}/{key}: "
                                               f"{exc.message}", step_id=step_id) from None
        ref = getattr(info, "uri", None) or f"{STORAGE_SCHEME}://{project_id}/{key}"
        return StoredResult(None, ref, len(data))

    def load(self, ref: str) -> Any:
        parts = urlsplit(ref)
        if parts.scheme == STORAGE_SCHEME:
            return self._load_object(ref, parts.netloc, unquote(parts.path.lstrip("/")))
        if parts.scheme == "file":                 # written before results went through the object store
            try:
                return json.loads(Path(unquote(parts.path)).read_text(encoding="utf-8"))
            except OSError as exc:
                raise A44Error(E_RESULT_TOO_LARGE, f"the stored result {ref} cannot be read: {exc}") from None
        raise A44Error(E_RESULT_TOO_LARGE, f"unknown result reference {ref!r}")

    def _load_object(self, ref: str, project: str, key: str) -> Any:
        try:
            data, info = self.storage.get(project, key)
        except A44Error as exc:
            raise A44Error(E_RESULT_TOO_LARGE, f"the stored result {ref} cannot be read: {exc.message}") from None
        expected = getattr(info, "sha256", None)
        if expected and hashlib.sha256(data).hexdigest() != expected:
            raise A44Error(E_RESULT_TOO_LARGE, f"the stored result {ref} does not match its sha256 {expected}")
        return json.loads(data)
