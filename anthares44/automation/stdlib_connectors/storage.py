"""`storage/put` and `storage/get` (§14): objects under a project prefix.

`ObjectStore` is the interface (put/get/head/delete of bytes under (project, key)); `LocalObjectStore` keeps them
in `$A44_HOME/storage/<project>/objects/<key>` with a metadata file beside them in `.../meta/<key>.json`. An
S3-compatible backend implements the same four methods with `<bucket>/<project>/<key>` object names. Writes are
atomic (temp file + rename), so a reader never sees half an object and a retried put simply writes it again.

Keys are relative paths of 1-512 characters: segments of letters, digits and `._-=+@,`, separated by `/`; no empty
segment, no `.` or `..`, no leading `/`, no backslash or control characters. Anything else is refused with
`E_PARAMS_INVALID` before any file is touched, and the resolved path is checked to be inside the project's prefix.

The same store keeps step results over 256 KB (runtime/store/results.py) under the project's reserved `_results/`
prefix: `storage/get` can read them, `storage/put` refuses to write there.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..compiler.models.params import StorageGetParams, StoragePutParams
from ..errors import E_PARAMS_INVALID, E_STORAGE, E_STORAGE_NOT_FOUND, A44Error
from ..paths import storage_root
from .protocol import StepContext

_SEGMENT = re.compile(r"^[A-Za-z0-9._\-=+@,]+$")
MAX_KEY = 512
MAX_RESULT_BYTES = 256 * 1024     # storage/get returns the content inline up to this; beyond, only metadata
RESERVED_PREFIX = "_results"       # step results over 256 KB (runtime/store/results.py): readable, never written by steps


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    sha256: str
    content_type: str
    uri: str


class ObjectStore(Protocol):
    def put(self, project: str, key: str, data: bytes, content_type: str) -> ObjectInfo: ...
    def get(self, project: str, key: str) -> tuple[bytes, ObjectInfo]: ...
    def head(self, project: str, key: str) -> ObjectInfo | None: ...
    def delete(self, project: str, key: str) -> bool: ...


def check_key(key: str) -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY:
        raise A44Error(E_PARAMS_INVALID, f"a storage key has 1 to {MAX_KEY} characters")
    for seg in key.split("/"):
        if seg in ("", ".", "..") or not _SEGMENT.match(seg):
            raise A44Error(E_PARAMS_INVALID, f"storage key {key[:120]!r} is not allowed: use relative segments of "
                                             f"letters, digits and ._-=+@, separated by /, without . or ..")
    return key


def check_project(project: str) -> str:
    if not _SEGMENT.match(project or "") or project in (".", ".."):
        raise A44Error(E_PARAMS_INVALID, f"project id {project[:80]!r} cannot be a storage prefix")
    return project


class LocalObjectStore:
    def __init__(self, root: Path):
        self.root = Path(root)

    def _paths(self, project: str, key: str) -> tuple[Path, Path]:
        check_project(project)
        check_key(key)
        base = (self.root / project).resolve()
        obj = (base / "objects" / key).resolve()
        meta = (base / "meta" / (key + ".json")).resolve()
        for p, sub in ((obj, "objects"), (meta, "meta")):
            if not p.is_relative_to(base / sub):      # symlinks or anything the key check missed
                raise A44Error(E_PARAMS_INVALID, f"storage key {key[:120]!r} leaves the project prefix")
        return obj, meta

    def uri(self, project: str, key: str) -> str:
        return f"a44-storage://{project}/{key}"

    @staticmethod
    def _atomic(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)

    def put(self, project: str, key: str, data: bytes, content_type: str) -> ObjectInfo:
        obj, meta = self._paths(project, key)
        info = ObjectInfo(key, len(data), hashlib.sha256(data).hexdigest(), content_type, self.uri(project, key))
        try:
            self._atomic(obj, data)
            self._atomic(meta, json.dumps({"size": info.size, "sha256": info.sha256,
                                           "contentType": content_type}).encode())
        except OSError as exc:
            raise A44Error(E_STORAGE, f"could not write {info.uri}: {exc.strerror or exc}") from None
        return info

    def head(self, project: str, key: str) -> ObjectInfo | None:
        obj, meta = self._paths(project, key)
        if not obj.is_file():
            return None
        try:
            m = json.loads(meta.read_text())
        except (OSError, ValueError):
            data = obj.read_bytes()
            m = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                 "contentType": "application/octet-stream"}
        return ObjectInfo(key, m["size"], m["sha256"], m["contentType"], self.uri(project, key))

    def get(self, project: str, key: str) -> tuple[bytes, ObjectInfo]:
        info = self.head(project, key)
        if info is None:
            raise A44Error(E_STORAGE_NOT_FOUND, f"no object {self.uri(project, key)}")
        obj, _ = self._paths(project, key)
        try:
            return obj.read_bytes(), info
        except OSError as exc:
            raise A44Error(E_STORAGE, f"could not read {info.uri}: {exc.strerror or exc}") from None

    def delete(self, project: str, key: str) -> bool:
        obj, meta = self._paths(project, key)
        found = obj.is_file()
        for p in (obj, meta):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        return found


def _store(ctx: StepContext) -> ObjectStore:
    s = ctx.services.get("storage")
    return s if s is not None else LocalObjectStore(storage_root(None))


def _info(info: ObjectInfo) -> dict[str, Any]:
    return {"key": info.key, "uri": info.uri, "size": info.size, "sha256": info.sha256,
            "contentType": info.content_type}


class StoragePutConnector:
    """Writes `body` (a string as UTF-8 text, any other value as JSON) under `key`; the result is the object's
    metadata, never its content: `{key, uri, size, sha256, contentType}`."""

    name = "storage/put"
    params_model = StoragePutParams

    async def invoke(self, params: Any, ctx: StepContext) -> dict[str, Any]:
        p = params if isinstance(params, StoragePutParams) else StoragePutParams.model_validate(params)
        if check_key(p.key).split("/", 1)[0] == RESERVED_PREFIX:
            raise A44Error(E_PARAMS_INVALID, f"storage key {p.key[:120]!r} is under {RESERVED_PREFIX}/, where the "
                                             f"runtime keeps step results over 256 KB; use another prefix")
        if isinstance(p.body, str):
            data = p.body.encode("utf-8")
        else:
            data = json.dumps(p.body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        return _info(_store(ctx).put(ctx.project_id, p.key, data, p.contentType))


class StorageGetConnector:
    """Reads `key`: metadata plus the content (`json` for a JSON content type, `text` for text, else `base64`) when
    it is at most 256 KB; a larger object returns its metadata only (`"inline": false`)."""

    name = "storage/get"
    params_model = StorageGetParams

    async def invoke(self, params: Any, ctx: StepContext) -> dict[str, Any]:
        p = params if isinstance(params, StorageGetParams) else StorageGetParams.model_validate(params)
        store = _store(ctx)
        info = store.head(ctx.project_id, p.key)
        if info is None:
            raise A44Error(E_STORAGE_NOT_FOUND, f"no object with key {p.key!r} in project {ctx.project_id}")
        out = _info(info)
        if info.size > MAX_RESULT_BYTES:
            out["inline"] = False
            return out
        data, _ = store.get(ctx.project_id, p.key)
        ctype = info.content_type.split(";")[0].strip().lower()
        if "json" in ctype:
            try:
                out["json"] = json.loads(data)
                return out
            except ValueError:
                pass
        if ctype.startswith("text/") or "json" in ctype:
            out["text"] = data.decode("utf-8", errors="replace")
        else:
            out["base64"] = base64.b64encode(data).decode("ascii")
        return out
