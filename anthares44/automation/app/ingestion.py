"""The ingestion verbs of the Python API, for one project (the same functions the CLI and the REST API use):

    async with await Automation.connect(project="pj_checkout_prod") as auto:
        ing = Ingestion(auto)
        result = await ing.publish_event("billing.invoice.finalized", {"invoiceId": "inv_8812"},
                                         "invoice:inv_8812:finalized:v1", partition_key="cust_4471")
        result.event_id, result.created, result.deliveries      # [{trigger_id, outcome, run_id}]
        token = await ing.create_token("ci", ["automation:write"], expires="30d", allow_cidrs=["203.0.113.0/24"])
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..tracing import Parent
from .contract.services import EventsService


def ingestion_for(auto):
    """`Ingestion(auto)` for a local `Automation`; the API-backed equivalent for a `RemoteAutomation`."""
    return auto.ingestion() if getattr(auto, "remote", False) else Ingestion(auto)


class Ingestion(EventsService):
    def __init__(self, auto):
        self.auto = auto
        self.store = auto.store
        self.project = auto.project

    # --- bus (§8) -----------------------------------------------------------------------------------------------
    async def publish_event(self, type: str, data: Any, idempotency_key: str, *, partition_key: str | None = None,
                            occurred_at: str | datetime | None = None, parent: Parent | None = None,
                            event_id: str | None = None):
        from ..runtime.ingestion.bus import publish_event

        return await publish_event(self.store, self.project, type, data, idempotency_key,
                                   partition_key=partition_key, occurred_at=occurred_at, parent=parent,
                                   event_id=event_id)

    async def publish_raw(self, body: bytes, *, header_key: str | None = None, parent: Parent | None = None):
        """The envelope as received (the HTTP entry): kept as a dead letter when it cannot be deserialized."""
        from ..runtime.ingestion.bus import publish_raw

        return await publish_raw(self.store, self.project, body, header_key=header_key, parent=parent)

    async def events(self, type: str | None = None, limit: int = 50, offset: int = 0) -> list[dict]:
        from ..runtime.ingestion.bus import list_events

        return await list_events(self.store, self.project, type, limit, offset)

    async def event(self, event_id: str) -> dict:
        from ..runtime.ingestion.bus import get_event

        return await get_event(self.store, self.project, event_id)

    # --- tokens (§17) ---------------------------------------------------------------------------------------------
    async def create_token(self, name: str, scopes: list[str], *, expires: str | timedelta | None = "30d",
                           allow_cidrs: list[str] | None = None):
        from ..runtime.ingestion.tokens import create_token
        from .admin import token_ttl

        return await create_token(self.store, self.project, name, scopes, token_ttl(expires), allow_cidrs)
