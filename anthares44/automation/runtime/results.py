"""Step results: inline in the attempt row up to 256 KB of JSON, otherwise a file under `$A44_HOME/results`
whose `file://` URI the row keeps (§7.4).

The file is written (atomically: temp file + rename) before the row that references it, so a reference never
points at nothing; a crash between the two leaves an orphan file, which is harmless.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from ..errors import E_RESULT_TOO_LARGE, A44Error

MAX_INLINE_BYTES = 256 * 1024


@dataclass(frozen=True)
class StoredResult:
    inline: str | None  # JSON text for the jsonb column
    ref: str | None  # file:// URI
    size: int | None  # bytes of the JSON text


def encode_json(value) -> str:
    """Compact JSON; what we store and what we count against the 256 KB limit."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise A44Error(E_RESULT_TOO_LARGE, f"the value is not JSON-serialisable: {exc}") from None


class ResultFiles:
    """Where results too large for a row go."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def store(self, value, *, project_id: str, run_id: str, step_id: str, epoch: int, kind: str,
              attempt: int) -> StoredResult:
        if value is None:
            return StoredResult(None, None, None)
        text = encode_json(value)
        data = text.encode("utf-8")
        if len(data) <= MAX_INLINE_BYTES:
            return StoredResult(text, None, len(data))
        path = self.root / _safe(project_id) / _safe(run_id) / f"{_safe(step_id)}.e{epoch}.{kind}.a{attempt}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            tmp.replace(path)
        except OSError as exc:
            raise A44Error(E_RESULT_TOO_LARGE, f"the result of step {step_id} is {len(data)} bytes (more than "
                                               f"{MAX_INLINE_BYTES}) and could not be written to {path}: {exc}",
                           step_id=step_id) from None
        return StoredResult(None, "file://" + quote(str(path.resolve())), len(data))

    @staticmethod
    def load(ref: str):
        parts = urlsplit(ref)
        if parts.scheme != "file":
            raise A44Error(E_RESULT_TOO_LARGE, f"unknown result reference {ref!r}")
        try:
            return json.loads(Path(unquote(parts.path)).read_text(encoding="utf-8"))
        except OSError as exc:
            raise A44Error(E_RESULT_TOO_LARGE, f"the stored result {ref} cannot be read: {exc}") from None


def _safe(part: str) -> str:
    """A path component that cannot escape the results directory."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in part)
    return cleaned.strip(".") or "_"
