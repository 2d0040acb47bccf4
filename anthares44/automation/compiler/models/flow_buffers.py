"""The YAML of a workflow's debounce and batch (§22, docs/flow.md "Debounce and batch"): events delivered to the
workflow create no run of their own; they are buffered per `key` and the run started when the buffer flushes
carries them. The shapes are here; the bounds of the durations and of `maxBytes` are rules/flow_buffers.py's
(A44290-A44292), so a value out of range is named with the bound it misses.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, StrictStr, WithJsonSchema
from pydantic_core import PydanticCustomError

from .base import Model
from .types import RunSpan

MIN_SPAN_MS = 1000                      # quiet / maxWait: at least 1 s ...
MAX_SPAN_MS = 7 * 86_400_000            # ... at most 7 d (an open buffer is a promise to start a run)
MAX_BATCH_SIZE = 10_000
MIN_BYTES, MAX_BYTES = 1024, 10 * 1024 * 1024
DEFAULT_BATCH_SIZE = 100
DEFAULT_BATCH_WAIT_MS = 5000
DEFAULT_BATCH_BYTES = 1024 * 1024
DEFAULT_DEBOUNCE_WAIT_MS = 10 * 60_000  # debounce maxWait when not given: 10 m, or quiet when quiet is longer
SIZE_PATTERN = r"^[0-9]+ ?(B|KB|MB)?$"
_SIZE = re.compile(r"([0-9]{1,12}) ?(B|KB|MB)?")
_UNITS = {None: 1, "B": 1, "KB": 1024, "MB": 1024 * 1024}


def parse_size(value: Any) -> int:
    """`1MB`, `512KB`, `2048` (bytes): the byte count (1 KB = 1024 B, as the 1 MB webhook body limit)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise PydanticCustomError("a44_size", "expected a size such as 512KB or 1MB")
    if isinstance(value, int):
        return value
    m = _SIZE.fullmatch(value.strip())
    if m is None:
        raise PydanticCustomError("a44_size", "'{value}' is not a size; write e.g. 512KB or 1MB", {"value": value})
    return int(m.group(1)) * _UNITS[m.group(2)]


Size = Annotated[int, BeforeValidator(parse_size),
                 WithJsonSchema({"type": ["string", "integer"], "pattern": SIZE_PATTERN,
                                 "description": "A size in bytes: a number, or with KB / MB (1 KB = 1024 B).",
                                 "examples": ["512KB", "1MB"]})]


class Debounce(Model):
    """Collapse a burst of events per key into one run, started once the key has been quiet for `quiet`
    (and at the latest `maxWait` after its first event)."""

    key: StrictStr | None = None
    """CEL over `input` (the event's data) and `event` (its envelope), e.g. `input.docId`; one buffer per value.
    An event whose key fails or is null goes to the DLQ with E_FLOW_KEY_INVALID. Without it: one buffer."""
    quiet: RunSpan
    """Required: the run starts once no event of the key came for this long (1s..7d)."""
    maxWait: RunSpan | None = None
    """The run starts at the latest this long after the key's first event, under steady traffic (quiet..7d;
    default 10m, or quiet when quiet is longer)."""
    deliver: Literal["last", "first", "all"] = "last"
    """What the run gets: `last` / `first` (by occurred_at): that event's data as `input`; `all`:
    `input.events`, every envelope in occurred_at order."""


class Batch(Model):
    """Gather events per key into one run of up to `maxSize` events, started `maxWait` after the first."""

    key: StrictStr | None = None
    """CEL over `input` and `event`, as debounce's; one batch per value at a time. Without it: one batch."""
    maxSize: int = Field(DEFAULT_BATCH_SIZE, ge=1, le=MAX_BATCH_SIZE, strict=True)
    """At most this many events per run (1..10000, default 100); the event that fills a batch starts its run."""
    maxWait: RunSpan | None = None
    """The run starts at the latest this long after the batch's first event (1s..7d, default 5s)."""
    maxBytes: Size | None = None
    """At most this many bytes of envelope JSON per run (1KB..10MB, default 1MB); an event that would pass it
    starts the run of the batch before it and opens the next."""
