"""Parameter models of the built-in connectors (§14): the fields a step of each `uses` takes.

They live with the YAML surface (the compiler validates them and the JSON Schema shows them) and the runtime
connectors read the same models, so the two can never disagree about a field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictStr

from .base import Model
from .types import Duration, PositiveInt

# flow keys and pauses (§22, docs/flow.md): what a `rateKey` may be, and the bounds of a 429's pause
RATE_KEY_PATTERN = r"^[A-Za-z0-9_.:/@-]{1,200}$"
DEFAULT_MAX_PAUSE_MS = 3600 * 1000     # a far side that asks for longer is asked again after an hour
MIN_PAUSE_MS = 1000                    # no Retry-After, `0` or a date in the past: wait a second, never spin
MAX_PAUSE_LIMIT_MS = 24 * 3600 * 1000  # the largest `maxPause` a workflow may set (lint A44250)

HTTP_METHODS = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]


class PassParams(Model):
    """`uses: pass`: no effect; returns its templated `output`."""

    output: Any = None
    """Value returned as the step result; strings may be templates."""


class HttpParams(Model):
    """`uses: http` (or a declared http connector): one HTTP request."""

    method: HTTP_METHODS = "GET"
    """HTTP method."""
    url: StrictStr | None = None
    """Absolute URL (template); with a declared connector use `path`."""
    path: StrictStr | None = None
    """Path joined to the declared connector's `baseUrl` (template)."""
    headers: dict[str, StrictStr | int | float] | None = None
    """Request headers (templates; a number from a `{{ expr }}` template is sent as its text)."""
    query: dict[str, Any] | None = None
    """Query-string parameters (templates)."""
    json_: Any = Field(None, alias="json")
    """JSON body (strings may be templates); sent with `Content-Type: application/json`."""
    body: Any = None
    """Raw body: a string is sent as is; any other value is sent as JSON. Use `json` or `body`, not both."""
    retryOn: list[int] | None = None
    """Statuses retried (default 408, 429, 500, 502, 503, 504)."""
    maxResponseBytes: PositiveInt = 1_048_576
    """Responses larger than this are cut."""
    rateKey: StrictStr | None = Field(None, pattern=RATE_KEY_PATTERN)
    """Flow key a 429 pauses (§22, docs/flow.md); default `<connector>:<project>:<host of the URL>`."""
    maxPause: Duration | None = None
    """Longest pause a 429's `Retry-After` may cause (1s to 24h; default 1h)."""


class VpnHttpParams(HttpParams):
    """`uses: vpn/http`: as http, routed through a private network; fails with `E_TUNNEL_DOWN`, never falls back."""

    network: StrictStr | None = None
    """Private network name (required unless the declared connector sets it)."""


class SqlExecuteParams(Model):
    """`uses: sql/execute`: one parameterized statement. Templates never go in `query`: values go in `params`."""

    query: StrictStr
    """SQL with `$1`, `$2`... placeholders; `run_id` and `step_id` are available as named values in params."""
    params: list[Any] | None = None
    """Values bound to `$1`, `$2`... (templates allowed here)."""
    dsnSecretRef: StrictStr | None = None
    """Secret holding a DSN; default: the project database."""
    maxRows: PositiveInt = 1000
    """Rows returned at most."""


class StoragePutParams(Model):
    """`uses: storage/put`: write an object under the project prefix."""

    key: StrictStr
    """Object key (template)."""
    body: Any = None
    """Content: JSON value or string (templates allowed)."""
    contentType: StrictStr = "application/json"
    """Content type stored with the object."""


class StorageGetParams(Model):
    """`uses: storage/get`: read an object under the project prefix."""

    key: StrictStr
    """Object key (template)."""


class QueuePublishParams(Model):
    """`uses: queue/publish`: publish an event envelope onto the bus; the idempotency key derives from the step."""

    type: StrictStr = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    """Event type, e.g. `billing.invoice.finalized`."""
    data: Any = None
    """Event payload (templates allowed)."""
    partitionKey: StrictStr | None = None
    """Partition key (template)."""


class BotInvokeParams(Model):
    """`uses: bot/invoke` (§15): an LLM call whose validated answer is the recorded step result."""

    bot: StrictStr | None = None
    """Bot id, e.g. `bot_support_triage`."""
    prompt: StrictStr
    """Jinja2 template over the run state."""
    input: dict[str, Any] | None = None
    """Extra values for the prompt."""
    schema_: dict[str, StrictStr] | None = Field(None, alias="schema")
    """Expected answer: field -> `string`, `number`, `boolean` or an enum `p1|p2|p3`."""
    maxOutputTokens: PositiveInt = 1024
    """Upper bound of the answer's tokens."""
    model: StrictStr | None = None
    """Model name passed to the endpoint."""
    secretRef: StrictStr | None = None
    """Secret holding the endpoint: JSON `{"baseUrl", "apiKey", "model"}`, or the bare key (with a `baseUrl`)."""


BUILTIN_PARAMS: dict[str, type[Model]] = {
    "pass": PassParams,
    "http": HttpParams,
    "vpn/http": VpnHttpParams,
    "sql/execute": SqlExecuteParams,
    "storage/put": StoragePutParams,
    "storage/get": StorageGetParams,
    "queue/publish": QueuePublishParams,
    "bot/invoke": BotInvokeParams,
}
