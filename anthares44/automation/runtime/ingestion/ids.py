"""Ids of the ingestion plane: `evt_<ULID>`, `dlq_<ULID>` (dead letters), `whs_<ULID>`, `tok_<ULID>` (monotonic
within a process)."""

from __future__ import annotations

from datetime import datetime

from ..ulid import UlidGenerator

_gen = UlidGenerator()


def new_id(prefix: str, at: datetime) -> str:
    return f"{prefix}_{_gen.new(at)}"


def new_event_id(at: datetime) -> str:
    return new_id("evt", at)
