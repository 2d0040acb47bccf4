"""The one JSON encoding of documents users read (CLI `--format json`, REST answers, envelopes): timestamps as
ISO 8601 UTC with milliseconds and a `Z`, durations as whole milliseconds, non-ASCII text kept as is."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any


def ms(delta: timedelta | None) -> int | None:
    return None if delta is None else round(delta.total_seconds() * 1000)


def iso(value: datetime) -> str:
    """UTC, millisecond precision, `Z` suffix: `2026-07-19T14:02:11.884Z`."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, timedelta):
        return ms(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def to_json(doc: Any, *, indent: int | None = 2) -> str:
    return json.dumps(doc, default=_default, ensure_ascii=False, indent=indent)


# an escaped NUL in JSON text (not one whose backslash is itself escaped): PostgreSQL's jsonb refuses it
# ("unsupported Unicode escape sequence"), so a step result holding one could never be committed
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def holds_nul(text: str) -> bool:
    """True when the JSON text `text` holds a string with the character U+0000."""
    return _NUL_ESCAPE.search(text) is not None
