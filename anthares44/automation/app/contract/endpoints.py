"""The REST API's endpoints: each `/v1/automation` method and path written once. http/routing.py declares its
routes with them (summary, scope, models), and the REST client (remote.py, remote_services.py) builds its calls
from them, so the two sides cannot name different paths. Ids in a path segment follow ID_PATTERN (http/params.py
checks them, models/common.py types them).

    await self._call(ep.RUN.at(run_id=run_id))      # GET /v1/automation/runs/run_...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from string import Formatter
from urllib.parse import quote

PREFIX = "/v1/automation"
MAX_ID_LEN = 200
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


@dataclass(frozen=True)
class Call:
    """One request's method and path, its segments filled in and quoted."""
    method: str
    path: str


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str   # with `{name}` segments, as aiohttp routes them

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(name for _, name, _, _ in Formatter().parse(self.path) if name)

    def at(self, **segments: object) -> Call:
        """This endpoint with its `{name}` segments filled in (each quoted whole); every segment is required."""
        missing = set(self.segments) - set(segments)
        if missing or set(segments) - set(self.segments):
            raise TypeError(f"{self.method} {self.path} takes the segments {self.segments}, not {sorted(segments)}")
        return Call(self.method, self.path.format(**{k: quote(str(v), safe="") for k, v in segments.items()}))

    def call(self) -> Call:
        """This endpoint when it has no segments."""
        return self.at()


OPENAPI = Endpoint("GET", f"{PREFIX}/openapi.json")

# runs, logs and publishing
PUBLISH = Endpoint("POST", PREFIX + "/publish")
RUN_START = Endpoint("POST", PREFIX + "/runs")
RUNS = Endpoint("GET", PREFIX + "/runs")
RUN = Endpoint("GET", PREFIX + "/runs/{run_id}")
RUN_LOGS = Endpoint("GET", PREFIX + "/runs/{run_id}/logs")
PARTITIONS = Endpoint("GET", PREFIX + "/partitions/{target}")
SKIP = Endpoint("POST", PREFIX + "/runs/{run_id}/skip")
CANCEL = Endpoint("POST", PREFIX + "/runs/{run_id}/cancel")
RESOLVE = Endpoint("POST", PREFIX + "/runs/{run_id}/resolve")
LOGS = Endpoint("GET", PREFIX + "/logs")
REPLAY = Endpoint("POST", PREFIX + "/replay")

# events
EVENT_PUBLISH = Endpoint("POST", PREFIX + "/events")
EVENTS = Endpoint("GET", PREFIX + "/events")
EVENT = Endpoint("GET", PREFIX + "/events/{event_id}")

# queues and dead letters
QUEUES = Endpoint("GET", PREFIX + "/queues")
DEAD_LETTERS = Endpoint("GET", PREFIX + "/dead-letters")
DEAD_LETTER = Endpoint("GET", PREFIX + "/dead-letters/{dead_letter_id}")
DLQ_STATS = Endpoint("GET", PREFIX + "/queues/{queue}/dead-letters/stats")
DLQ_REDRIVE = Endpoint("POST", PREFIX + "/queues/{queue}/dead-letters/redrive")

# alerts
ALERT_RULES = Endpoint("GET", PREFIX + "/alert-rules")
ALERT_RULE_PUT = Endpoint("PUT", PREFIX + "/alert-rules/{name}")
ALERT_RULE = Endpoint("GET", PREFIX + "/alert-rules/{name}")
ALERT_RULE_RM = Endpoint("DELETE", PREFIX + "/alert-rules/{name}")
ALERT_RULE_TEST = Endpoint("POST", PREFIX + "/alert-rules/{name}/test")
BUILTIN_ALERTS = Endpoint("PUT", PREFIX + "/builtin-alerts")
ALERTS = Endpoint("GET", PREFIX + "/alerts")

# notifications
CHANNELS = Endpoint("GET", PREFIX + "/channels")
CHANNEL_PUT = Endpoint("PUT", PREFIX + "/channels/{name}")
CHANNEL = Endpoint("GET", PREFIX + "/channels/{name}")
CHANNEL_RM = Endpoint("DELETE", PREFIX + "/channels/{name}")
CHANNEL_TEST = Endpoint("POST", PREFIX + "/channels/{name}/test")
NOTIFICATIONS = Endpoint("GET", PREFIX + "/notifications")
NOTIFICATION = Endpoint("GET", PREFIX + "/notifications/{notification_id}")
NOTIFICATION_RETRY = Endpoint("POST", PREFIX + "/notifications/{notification_id}/retry")

# admin: tokens, webhook secrets, connectors, metrics, schedules
WHOAMI = Endpoint("GET", PREFIX + "/whoami")
TOKENS = Endpoint("GET", PREFIX + "/tokens")
TOKEN_CREATE = Endpoint("POST", PREFIX + "/tokens")
TOKEN_REVOKE = Endpoint("DELETE", PREFIX + "/tokens/{token_id}")
WEBHOOK_SECRET = Endpoint("POST", PREFIX + "/webhooks/{trigger}/secret")
WEBHOOK_ROTATE = Endpoint("POST", PREFIX + "/webhooks/{trigger}/rotate")
CONNECTORS = Endpoint("GET", PREFIX + "/connectors")
METRICS = Endpoint("GET", PREFIX + "/metrics")
SCHEDULES_PREVIEW = Endpoint("POST", PREFIX + "/schedules/preview")

# every endpoint the route table declares (openapi.json is served beside it)
ENDPOINTS: tuple[Endpoint, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Endpoint) and v is not OPENAPI)
