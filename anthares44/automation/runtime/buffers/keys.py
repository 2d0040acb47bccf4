"""The buffer key of an event: the workflow's debounce or batch `key` (CEL over `input`, the event's data, and
`event`, its envelope), evaluated off the event loop within the ingestion time limit. A key that fails, is null or
empty, is not a scalar, or is longer than MAX_KEY_LEN raises E_FLOW_KEY_INVALID: the caller sends the envelope to
the DLQ; there is never a shared default bucket. Without a `key`, every event of the workflow shares one buffer
(the buffer key '')."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ...errors import E_FLOW_KEY_INVALID, A44Error
from .. import evaluation

MAX_KEY_LEN = 256


@lru_cache(maxsize=256)
def _program(tree: str):
    from ...grammar import load_program

    return load_program(json.loads(tree))


async def buffer_key(spec: dict[str, Any], env: dict[str, Any]) -> str:
    """The key of envelope `env` under buffer spec `spec` (the IR's `buffer`), or A44Error(E_FLOW_KEY_INVALID)."""
    expr = spec.get("key")
    if not expr:
        return ""
    what = f"the {spec['kind']} key {expr['cel']!r}"
    try:
        program = _program(json.dumps(expr["program"], sort_keys=True))
        value = await evaluation.evaluate(program, {"input": env.get("data"), "event": env},
                                          evaluation.INGESTION_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - any failure of a user's expression is this event's key error
        raise A44Error(E_FLOW_KEY_INVALID, f"{what} failed on this event: {getattr(exc, 'message', exc)}"[:500],
                       hint="fix the key expression, or send the field it reads; `dlq redrive` retries") from None
    if value is None or isinstance(value, (dict, list, tuple)) or value == "":
        shown = "null" if value is None else "empty" if value == "" else type(value).__name__
        raise A44Error(E_FLOW_KEY_INVALID, f"{what} is {shown} for this event; a key must be a string or a number",
                       hint="send the field the key reads, or give the key a fallback in CEL")
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if len(text) > MAX_KEY_LEN:
        raise A44Error(E_FLOW_KEY_INVALID, f"{what} is {len(text)} characters long; at most {MAX_KEY_LEN}")
    return text
