"""The REST API's endpoints: each `/v1/automation` method, path and answer models (status -> model) written once.
http/routing.py declares its routes with them (summary, scope, parameters, body, error statuses) and generates
openapi.json; the REST client (remote.py, remote_services.py) builds its calls from them and reads each answer
through the model of its status, so the two sides cannot name different paths or documents.

    await self._call(ep.RUN.at(run_id=run_id))      # GET /v1/automation/runs/run_..., the answer a Run
"""

from __future__ import annotations

from dataclasses import dataclass, field
from string import Formatter
from urllib.parse import quote

from pydantic import BaseModel

from .models import admin as am
from .models import approvals as apm
from .models import common as cm
from .models import deploys as dm
from .models import events as ev
from .models import flow as fm
from .models import monitor as mm
from .models import queues as qm
from .models import runs as rm

PREFIX = "/v1/automation"


@dataclass(frozen=True)
class Call:
    """One request's method and path, its segments filled in and quoted."""
    method: str
    path: str
    endpoint: Endpoint | None = field(default=None, compare=False, repr=False)

    @property
    def answers(self) -> dict[int, type[BaseModel]]:
        return self.endpoint.answers if self.endpoint is not None else {}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str   # with `{name}` segments, as aiohttp routes them
    answers: dict[int, type[BaseModel]] = field(default_factory=dict, compare=False, hash=False)

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(name for _, name, _, _ in Formatter().parse(self.path) if name)

    def at(self, **segments: object) -> Call:
        """This endpoint with its `{name}` segments filled in (each quoted whole); every segment is required."""
        missing = set(self.segments) - set(segments)
        if missing or set(segments) - set(self.segments):
            raise TypeError(f"{self.method} {self.path} takes the segments {self.segments}, not {sorted(segments)}")
        return Call(self.method, self.path.format(**{k: quote(str(v), safe="") for k, v in segments.items()}), self)

    def call(self) -> Call:
        """This endpoint when it has no segments."""
        return self.at()


OPENAPI = Endpoint("GET", f"{PREFIX}/openapi.json")

# runs, logs and publishing
PUBLISH = Endpoint("POST", PREFIX + "/publish", {200: rm.PublishReport, 422: rm.PublishReport})
PUBLISH_PLAN = Endpoint("POST", PREFIX + "/publish/plan", {200: dm.PlanReport, 422: dm.PlanReport})
RUNS_MIGRATE = Endpoint("POST", PREFIX + "/workflows/{workflow}/migrate", {200: dm.MigrationReport})
VERSIONS = Endpoint("GET", PREFIX + "/workflows/{workflow}/versions", {200: dm.Versions})
VERSION_RETIRE = Endpoint("POST", PREFIX + "/workflows/{workflow}/versions/{version}/retire", {200: dm.RetireResult})
RUN_START = Endpoint("POST", PREFIX + "/runs", {202: rm.RunHandle, 200: rm.RunHandle})
RUNS = Endpoint("GET", PREFIX + "/runs", {200: rm.Runs})
RUN = Endpoint("GET", PREFIX + "/runs/{run_id}", {200: rm.Run})
RUN_LOGS = Endpoint("GET", PREFIX + "/runs/{run_id}/logs", {200: rm.RunLogs})
PARTITIONS = Endpoint("GET", PREFIX + "/partitions/{target}", {200: rm.Partitions})
SKIP = Endpoint("POST", PREFIX + "/runs/{run_id}/skip", {200: rm.SkipResult})
CANCEL = Endpoint("POST", PREFIX + "/runs/{run_id}/cancel", {200: rm.CancelResult})
SIGNAL = Endpoint("POST", PREFIX + "/runs/{run_id}/signals/{name}", {202: rm.SignalResult})
RUN_TREE = Endpoint("GET", PREFIX + "/runs/{run_id}/tree", {200: rm.RunTree})
APPROVE = Endpoint("POST", PREFIX + "/runs/{run_id}/approvals/{step}", {200: apm.DecisionResult})
APPROVALS = Endpoint("GET", PREFIX + "/approvals", {200: apm.Approvals})
WAKE = Endpoint("POST", PREFIX + "/runs/{run_id}/wake", {200: rm.TimerResult})
RESCHEDULE = Endpoint("POST", PREFIX + "/runs/{run_id}/reschedule", {200: rm.TimerResult})
RESOLVE = Endpoint("POST", PREFIX + "/runs/{run_id}/resolve", {200: rm.Run})
RUN_EXPLAIN = Endpoint("GET", PREFIX + "/runs/{run_id}/explain", {200: fm.RunExplain})
LOGS = Endpoint("GET", PREFIX + "/logs", {200: rm.LogPage})
HISTORIES = Endpoint("GET", PREFIX + "/histories", {200: rm.Histories})
REPLAY = Endpoint("POST", PREFIX + "/replay", {200: rm.ReplayResult})

# events
EVENT_PUBLISH = Endpoint("POST", PREFIX + "/events", {202: ev.EventResult, 200: ev.EventResult})
EVENTS = Endpoint("GET", PREFIX + "/events", {200: ev.EventList})
EVENT = Endpoint("GET", PREFIX + "/events/{event_id}", {200: ev.Event})

# queues and dead letters
QUEUES = Endpoint("GET", PREFIX + "/queues", {200: qm.QueueStats})
DEAD_LETTERS = Endpoint("GET", PREFIX + "/dead-letters", {200: qm.DeadLetters})
DEAD_LETTER = Endpoint("GET", PREFIX + "/dead-letters/{dead_letter_id}", {200: qm.DeadLetter})
DLQ_STATS = Endpoint("GET", PREFIX + "/queues/{queue}/dead-letters/stats", {200: qm.DlqStats})
DLQ_REDRIVE = Endpoint("POST", PREFIX + "/queues/{queue}/dead-letters/redrive", {200: qm.RedriveReport})

# flow control: paused flow keys (§22)
FLOW_KEYS = Endpoint("GET", PREFIX + "/flow/keys", {200: fm.FlowKeys})
FLOW_PAUSE = Endpoint("POST", PREFIX + "/flow/pause", {200: fm.FlowChange})
FLOW_RESUME = Endpoint("POST", PREFIX + "/flow/resume", {200: fm.FlowChange})
FLOW_BUFFERS = Endpoint("GET", PREFIX + "/flow/buffers", {200: fm.FlowBuffers})

# alerts
ALERT_RULES = Endpoint("GET", PREFIX + "/alert-rules", {200: mm.AlertRules})
ALERT_RULE_PUT = Endpoint("PUT", PREFIX + "/alert-rules/{name}", {200: mm.AlertRuleChange})
ALERT_RULE = Endpoint("GET", PREFIX + "/alert-rules/{name}", {200: mm.AlertRule})
ALERT_RULE_RM = Endpoint("DELETE", PREFIX + "/alert-rules/{name}", {200: cm.Removed})
ALERT_RULE_TEST = Endpoint("POST", PREFIX + "/alert-rules/{name}/test", {200: mm.AlertTest})
BUILTIN_ALERTS = Endpoint("PUT", PREFIX + "/builtin-alerts", {200: mm.AlertRuleChange})
ALERTS = Endpoint("GET", PREFIX + "/alerts", {200: mm.AlertList})

# notifications
CHANNELS = Endpoint("GET", PREFIX + "/channels", {200: mm.Channels})
CHANNEL_PUT = Endpoint("PUT", PREFIX + "/channels/{name}", {200: mm.Channel})
CHANNEL = Endpoint("GET", PREFIX + "/channels/{name}", {200: mm.Channel})
CHANNEL_RM = Endpoint("DELETE", PREFIX + "/channels/{name}", {200: cm.Removed})
CHANNEL_TEST = Endpoint("POST", PREFIX + "/channels/{name}/test", {200: mm.Notification})
NOTIFICATIONS = Endpoint("GET", PREFIX + "/notifications", {200: mm.Notifications})
NOTIFICATION = Endpoint("GET", PREFIX + "/notifications/{notification_id}", {200: mm.Notification})
NOTIFICATION_RETRY = Endpoint("POST", PREFIX + "/notifications/{notification_id}/retry", {200: mm.Requeued})

# admin: tokens, webhook secrets, connectors, metrics, schedules
WHOAMI = Endpoint("GET", PREFIX + "/whoami", {200: am.Principal})
TOKENS = Endpoint("GET", PREFIX + "/tokens", {200: am.Tokens})
TOKEN_CREATE = Endpoint("POST", PREFIX + "/tokens", {201: am.NewToken})
TOKEN_REVOKE = Endpoint("DELETE", PREFIX + "/tokens/{token_id}", {200: am.Revoked})
WEBHOOK_SECRET = Endpoint("POST", PREFIX + "/webhooks/{trigger}/secret", {200: am.WebhookSecret})
WEBHOOK_ROTATE = Endpoint("POST", PREFIX + "/webhooks/{trigger}/rotate", {200: am.RotatedSecret})
CONNECTORS = Endpoint("GET", PREFIX + "/connectors", {200: am.Connectors})
METRICS = Endpoint("GET", PREFIX + "/metrics", {200: am.Metrics})
SCHEDULES_PREVIEW = Endpoint("POST", PREFIX + "/schedules/preview", {200: am.SchedulePreview, 422: am.SchedulePreview})

# every endpoint the route table declares (openapi.json is served beside it)
ENDPOINTS: tuple[Endpoint, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Endpoint) and v is not OPENAPI)
