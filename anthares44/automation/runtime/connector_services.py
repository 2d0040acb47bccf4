"""The runtime's side of the connector services (stdlib_connectors/services.py): the breakers' shared state as the
store's named queries (queries/connectors.sql), the paused flow keys as those of queries/flow.sql, the event publisher as the bus in the caller's store, the secret
source, the vpn routes file of the settings. The engine builds them once and hands them to every attempt in `StepContext.services`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..settings import Settings
from ..stdlib_connectors.network import networks_file
from ..stdlib_connectors.services import APP_DB, BREAKER_STATE, CLOCK, NETWORKS_FILE, PAUSES, PUBLISHER, BreakerState
from .ingestion.bus import EventResult, publish_event
from .store.core import Store


class StoreBreakerState:
    """BreakerStateStore on the control store: one named query per step, every instant from the caller's clock."""

    def __init__(self, store: Store):
        self.store = store

    async def state(self, project_id: str, connector_id: str) -> BreakerState | None:
        row = await self.store.fetchrow("breaker_state", project_id=project_id, connector_id=connector_id)
        if row is None or row["state"] == "closed":
            return None
        return BreakerState(row["state"], row["opened_until"], row["probe_until"])

    async def claim_probe(self, project_id: str, connector_id: str, now: datetime, token: str,
                          until: datetime) -> bool:
        return await self.store.fetchval("breaker_claim_probe", project_id=project_id, connector_id=connector_id,
                                         now=now, token=token, until=until) is not None

    async def record(self, project_id: str, connector_id: str, bucket: datetime, ok: int, failed: int,
                     since: datetime) -> tuple[int, int]:
        sums = await self.store.fetchrow("breaker_record", project_id=project_id, connector_id=connector_id,
                                         bucket=bucket, ok=ok, failed=failed, since=since)
        return sums["ok"], sums["failed"]

    async def open(self, project_id: str, connector_id: str, now: datetime, open_for_ms: int) -> datetime | None:
        return await self.store.fetchval("breaker_open", project_id=project_id, connector_id=connector_id, now=now,
                                         open_for_ms=open_for_ms)

    async def probe_failed(self, project_id: str, connector_id: str, now: datetime, open_for_ms: int,
                           max_open_ms: int, token: str) -> int | None:
        row = await self.store.fetchrow("breaker_probe_failed", project_id=project_id, connector_id=connector_id,
                                        now=now, open_for_ms=open_for_ms, max_open_ms=max_open_ms, token=token)
        return None if row is None else row["open_for_ms"]

    async def probe_succeeded(self, project_id: str, connector_id: str, now: datetime, token: str) -> None:
        await self.store.execute("breaker_probe_succeeded", project_id=project_id, connector_id=connector_id, now=now,
                                 token=token)


class StorePauses:
    """PauseStore on the control store: one named query per step, every instant from the caller's clock."""

    def __init__(self, store: Store):
        self.store = store

    async def paused_keys(self, project_id: str, now: datetime) -> dict[str, datetime]:
        return {r["key"]: r["paused_until"] for r in await self.store.fetch("flow_list", project_id=project_id,
                                                                             now=now)}

    async def paused_until(self, project_id: str, key: str, now: datetime) -> datetime | None:
        return await self.store.fetchval("flow_paused_until", project_id=project_id, key=key, now=now)

    async def pause(self, project_id: str, key: str, now: datetime, until: datetime, reason: str) -> datetime:
        return await self.store.fetchval("flow_pause_upstream", project_id=project_id, key=key, now=now,
                                         until=until, reason=reason)


class BusPublisher:
    """EventPublisher onto the project's bus (§8.1) in this store: its dedupe, its triggers, its runs."""

    def __init__(self, store: Store):
        self.store = store

    async def publish(self, project_id: str, type: str, data: Any, idempotency_key: str, *,
                      partition_key: str | None = None) -> EventResult:
        return await publish_event(self.store, project_id, type, data, idempotency_key, partition_key=partition_key)


def connector_services(store: Store, app_db: Any = None, *, settings: Settings | None = None,
                       clock: Any = None) -> dict[str, Any]:
    """What every attempt of this engine may be given: the registry decides which connector sees which.
    `settings`: what the edge read (where the vpn routes file is; None: the defaults); `clock`: the engine's,
    which breakers and pauses read their instants from (None: the registry's)."""
    settings = settings if settings is not None else Settings()
    services = {PUBLISHER: BusPublisher(store), BREAKER_STATE: StoreBreakerState(store), PAUSES: StorePauses(store),
                APP_DB: app_db, NETWORKS_FILE: networks_file(settings)}
    if clock is not None:
        services[CLOCK] = clock
    return services
