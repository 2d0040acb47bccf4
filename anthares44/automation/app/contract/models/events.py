"""The event bus: publish, list, show."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .common import Body, Doc


class EventRequest(Body):
    id: str | None = Field(None, pattern=r"^evt_[0-9A-Za-z_-]{1,120}$",
                           description="a client-given envelope id: the same id and envelope again is one event")
    type: str
    data: Any = None
    idempotency_key: str | None = Field(None, description="or the A44-Idempotency-Key header; one is required")
    partition_key: str | None = None
    occurred_at: str | None = Field(None, description="ISO 8601 instant")


class EventResult(Doc):
    event_id: str
    created: bool
    key_age_seconds: float
    type: str
    idempotency_key: str
    deliveries: list[dict]


class EventList(Doc):
    events: list[dict]


class Event(Doc):
    event_id: str
