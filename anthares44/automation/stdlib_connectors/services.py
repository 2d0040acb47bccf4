"""The services the runtime injects into connectors: typed Protocols, so that no connector imports runtime/ or
app/ and none speaks SQL to the control store.

Keys of `StepContext.services` (the engine builds them, runtime/connector_services.py):
  * `PUBLISHER` (EventPublisher): puts an event on the project's bus (§8.1); seen by `queue/publish` only;
  * `BREAKER_STATE` (BreakerStateStore): the state circuit breakers share across daemons (breaker.py); used by the
    registry around a declared connector's call, never handed to a connector;
  * `PAUSES` (PauseStore): the paused flow keys every daemon sees (pauses.py, §22); used by the registry around
    the call of a connector that names a flow key (`http`), never handed to a connector;
  * `APP_DB`: the projects' application databases workflow SQL runs on, one per project (sql_database.AppDatabase:
    `pool(ctx.project_id)`), and the wall every workflow database connection passes;
  * `CLOCK`, `STORAGE`, `NETWORKS`, `HTTP_SESSION`: the registry's clock, object store, vpn routes, aiohttp session;
  * `NETWORKS_FILE`: the file of the vpn routes (network.py) when the registry was given none.
The secret source (SecretLookup) is `StepContext.secrets`; a registry without one answers from a static mapping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ..clock import SystemClock
from ..errors import E_SECRET_NOT_FOUND, A44Error
from ..redact import secret_parts

PUBLISHER = "publisher"
BREAKER_STATE = "breaker_state"
PAUSES = "flow_pauses"
APP_DB = "app_db"
CLOCK = "clock"
STORAGE = "storage"
NETWORKS = "networks"
NETWORKS_FILE = "networks_file"
HTTP_SESSION = "http_session"


class PublishedEvent(Protocol):
    event_id: str
    created: bool                 # False: the idempotency key was seen within the bus's dedupe window
    deliveries: list[dict]        # {trigger_id, outcome, run_id}


class EventPublisher(Protocol):
    async def publish(self, project_id: str, type: str, data: Any, idempotency_key: str, *,
                      partition_key: str | None = None) -> PublishedEvent: ...


class ContextClock:
    """The instants of what the registry wraps around a call (breakers, pauses): the engine's clock when the
    context brings one (`ctx.services[CLOCK]`), else the registry's `clock`, else the system's."""

    def __init__(self, clock: Any = None):
        self.clock = clock

    def now(self, ctx: Any) -> datetime:
        clock = ctx.services.get(CLOCK) or self.clock
        if clock is None:
            clock = self.clock = SystemClock()
        return clock.now()


@dataclass(frozen=True)
class BreakerState:
    """A breaker that is not closed (no state: closed)."""
    state: str                      # open | half_open
    opened_until: datetime | None
    probe_until: datetime | None


class BreakerStateStore(Protocol):
    """Where the breakers of every daemon keep their state; each method is one atomic step of breaker.py."""

    async def state(self, project_id: str, connector_id: str) -> BreakerState | None: ...

    async def claim_probe(self, project_id: str, connector_id: str, now: datetime, token: str,
                          until: datetime) -> bool:
        """Take the single probe of an open breaker whose openFor elapsed (or whose prober vanished)."""

    async def record(self, project_id: str, connector_id: str, bucket: datetime, ok: int, failed: int,
                     since: datetime) -> tuple[int, int]:
        """Count outcomes in their bucket; (ok, failed) summed over the buckets from `since`."""

    async def open(self, project_id: str, connector_id: str, now: datetime, open_for_ms: int) -> datetime | None:
        """Open a closed breaker; its `opened_until`, or None when it was not closed."""

    async def probe_failed(self, project_id: str, connector_id: str, now: datetime, open_for_ms: int,
                           max_open_ms: int, token: str) -> int | None:
        """Open again for twice the last period (within [open_for_ms, max_open_ms]); that period, or None."""

    async def probe_succeeded(self, project_id: str, connector_id: str, now: datetime, token: str) -> None: ...


class PauseStore(Protocol):
    """Where the paused flow keys of every daemon are kept (pauses.py); each method is one atomic statement."""

    async def paused_keys(self, project_id: str, now: datetime) -> dict[str, datetime]:
        """The keys of the project paused at `now`, with the ends of their pauses."""

    async def paused_until(self, project_id: str, key: str, now: datetime) -> datetime | None:
        """The end of the key's pause when it is paused at `now`, else None."""

    async def pause(self, project_id: str, key: str, now: datetime, until: datetime, reason: str) -> datetime:
        """Pause the key until at least `until` (a longer pause in place is kept); the pause's end."""


class SecretLookup(Protocol):
    """`await source(ref)` -> the value. `values()`, when present, lists what it handed out (to be scrubbed)."""

    async def __call__(self, ref: str) -> str: ...


class StaticSecrets:
    """A secret source from a mapping (tests, embedders)."""

    def __init__(self, secrets: Mapping[str, str] | None = None):
        self._secrets = dict(secrets or {})
        self._handed_out: set[str] = set()

    async def __call__(self, ref: str) -> str:
        value = self._secrets.get(ref)
        if value is None:
            raise A44Error(E_SECRET_NOT_FOUND, f"secret {ref!r} is not configured")
        self._handed_out |= secret_parts(value)
        return value

    def values(self) -> Iterable[str]:
        return tuple(self._handed_out)
