"""Connector files (§14): declared connector instances (`id: con_...`) that steps reference by id."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictStr

from .base import Model
from .params import RATE_KEY_PATTERN
from .types import Duration, PositiveInt

DECLARABLE_TYPES = ("http", "vpn/http", "sql/execute", "storage/put", "storage/get", "queue/publish", "bot/invoke")


class Auth(Model):
    """How the connector authenticates; the secret is referenced, never written here (§17)."""

    kind: Literal["bearer", "oauth2-client-credentials"]
    """`bearer` sends the secret as a token; `oauth2-client-credentials` fetches and caches a token."""
    secretRef: str = Field(pattern=r"^sec_[A-Za-z0-9_]+$")
    """Secret id, e.g. `sec_erp_client`: the token for `bearer`; JSON `{"client_id", "client_secret"}` for oauth2."""
    tokenUrl: StrictStr | None = None
    """OAuth2 token endpoint (default: `{baseUrl}/oauth/token`)."""
    scope: StrictStr | None = None
    """OAuth2 scope."""


class CircuitBreaker(Model):
    """Per connector and project: opens above the error rate, fails steps with `E_CIRCUIT_OPEN`."""

    errorRateThreshold: float = Field(0.5, gt=0, le=1)
    """Error ratio in the window that opens the breaker (0-1)."""
    window: Duration = 60_000
    """Sliding window of the error rate."""
    openFor: Duration = 30_000
    """How long it stays open before one probe; doubles after a failed probe, up to 5 minutes."""
    minRequests: PositiveInt = 10
    """No decision below this many requests in the window."""


class ConnectorDecl(Model):
    """A declared connector instance."""

    id: str = Field(pattern=r"^con_[A-Za-z0-9_.-]{1,120}$")
    """Connector id, `con_` + name, e.g. `con_erp_private`; steps use it as `uses: con_erp_private`."""
    type: Literal["http", "vpn/http", "sql/execute", "storage/put", "storage/get", "queue/publish", "bot/invoke"]
    """The built-in connector this instance configures."""
    kind: Literal["connector"] | None = None
    """Optional; the file kind is recognised by shape."""
    description: StrictStr | None = None
    """Free text."""
    baseUrl: StrictStr | None = None
    """Base URL that step `path`s are joined to."""
    network: StrictStr | None = None
    """Private network (vpn/http), routed as configured in `$A44_HOME/networks.json`; never the default route."""
    auth: Auth | None = None
    """Authentication."""
    headers: dict[str, StrictStr] | None = None
    """Headers sent on every request."""
    retryOn: list[int] | None = None
    """HTTP statuses that are retried (default 408, 429, 500, 502, 503, 504)."""
    timeout: Duration | None = None
    """Default timeout of requests."""
    circuitBreaker: CircuitBreaker | None = None
    """Circuit breaker settings."""
    rateKey: StrictStr | None = Field(None, pattern=RATE_KEY_PATTERN)
    """http: flow key a 429 pauses (§22, docs/flow.md); default `<connector id>:<project>:<host of the URL>`."""
    maxPause: Duration | None = None
    """http: longest pause a 429's `Retry-After` may cause (1s to 24h; default 1h)."""
    dsnSecretRef: StrictStr | None = None
    """sql/execute: secret holding a DSN (default: the project database)."""
