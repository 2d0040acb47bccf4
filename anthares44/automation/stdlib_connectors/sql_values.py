"""Values crossing the sql/execute boundary: step parameters into asyncpg, rows out as plain JSON.

Into the database: rendered parameters are JSON values, and asyncpg is strict about Python types per PostgreSQL
type, so a value is adapted to the type PostgreSQL inferred for its placeholder (from the prepared statement):
`json`/`jsonb` take any JSON value (encoded here, so `{{ input }}` binds a dict as a document), integers accept
digit strings, `numeric` takes a Decimal made from the text (no float rounding), text types take numbers as
their text, dates and timestamps take ISO 8601 strings. Anything else passes unchanged and asyncpg decides.

Out of the database: Decimal -> str (exact), datetime/date/time -> ISO 8601, timedelta -> seconds (float),
bytes -> base64, UUID and other objects -> str, NaN/Infinity -> str; records -> mappings, arrays -> lists.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

_INT_TYPES = {"int2", "int4", "int8", "oid"}
_FLOAT_TYPES = {"float4", "float8"}
_TEXT_TYPES = {"text", "varchar", "bpchar", "name", "citext"}


def _adapt_scalar(value: Any, typ: str) -> Any:
    if value is None:
        return None
    if typ in ("json", "jsonb"):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if typ in _INT_TYPES and isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    if typ in _INT_TYPES and isinstance(value, float) and value.is_integer():
        return int(value)
    if typ == "numeric" and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        try:
            return Decimal(str(value))
        except InvalidOperation:
            return value  # asyncpg reports the bad value with its placeholder number
    if typ in _FLOAT_TYPES and isinstance(value, (str, int)) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError:
            return value
    if typ in _TEXT_TYPES and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if typ == "bool" and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if typ == "uuid" and isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            return value
    if isinstance(value, str):
        try:
            if typ == "timestamptz" or typ == "timestamp":
                parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
                if typ == "timestamptz" and parsed.tzinfo is None:
                    parsed = parsed.replace(tzinfo=dt.UTC)
                return parsed
            if typ == "date":
                return dt.date.fromisoformat(value)
        except ValueError:
            return value
    return value


def adapt_params(values: list[Any], types: list[tuple[str, str | None]]) -> list[Any]:
    """Adapt rendered values to the placeholder types `(type name, element type name or None)`."""
    out = []
    for value, (typ, elem) in zip(values, types):
        if elem is not None and isinstance(value, list):
            out.append([_adapt_scalar(v, elem) for v in value])
        else:
            out.append(_adapt_scalar(value, typ))
    return out


def to_json(value: Any) -> Any:
    """A database value as plain JSON (see the module docstring for each type)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if hasattr(value, "items") and hasattr(value, "keys"):  # asyncpg.Record
        return {str(k): to_json(v) for k, v in value.items()}
    return str(value)
