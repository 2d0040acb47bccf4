"""The OpenAPI 3.1 document served at `GET /v1/automation/openapi.json`. Parameter schemas come from params.py,
the rules the server applies."""

from __future__ import annotations

from . import params as p

_ERR = {"$ref": "#/components/schemas/Error"}
_SCHEMAS = {p.ident: {"type": "string", "pattern": f"^{p.ID_PATTERN.pattern}$", "maxLength": p.MAX_ID_LEN},
            p.text: {"type": "string", "minLength": 1, "maxLength": p.MAX_TEXT_LEN},
            p.count: {"type": "integer", "minimum": 0, "maximum": p.BIGINT_MAX},
            p.age: {"type": "string", "description": "an age: 250ms, 60s, 15m, 48h, 7d (at most 36500d)"},
            p.flag: {"type": "boolean"},
            p.cursor: {"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "maxLength": 4 * p.MAX_ID_LEN,
                       "description": "the `next` cursor of the previous page"}}


def _param(name: str, where: str = "query") -> dict:
    table = {"query": p.QUERY, "path": p.PATH, "header": p.HEADERS}[where]
    out = {"name": name, "in": where, "schema": _SCHEMAS[table[name]]}
    if where == "path":
        out["required"] = True
    return out


def _resp(desc: str, schema: dict | None = None) -> dict:
    out: dict = {"description": desc}
    if schema is not None:
        out["content"] = {"application/json": {"schema": schema}}
    return out


def _errors(*codes: int) -> dict:
    names = {400: "bad request", 401: "missing, unknown, expired or revoked token", 403: "scope or address refused",
             404: "not found", 409: "version conflict", 413: "body too large", 415: "not application/json",
             408: "E_REQUEST_TIMEOUT (the body did not arrive in time) or, on a webhook, E_TIMESTAMP_SKEW",
             422: "refused (compile errors / template)", 405: "method not allowed"}
    return {str(c): _resp(names[c], _ERR) for c in codes}


def document() -> dict:
    auth = [{"bearer": []}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "a44 automation", "version": "1",
                 "description": "REST API of a44 automation (docs/api.md) and signed webhooks (docs/webhooks.md). "
                                "Payloads are those of the CLI's --format json."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "a44_pat_... token (`a44 auth token create`); scopes "
                                                          "automation:read (GET) and automation:write (POST)"},
                                "webhookSignature": {"type": "apiKey", "in": "header", "name": "A44-Signature",
                                                     "description": "hex HMAC-SHA256 of A44-Timestamp + '.' + raw "
                                                                    "body, keyed by the trigger's secret"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {
                    "type": "object", "required": ["code", "message"],
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"},
                                   "hint": {"type": "string"}}}}},
                "RunId": {"type": "object", "required": ["run_id"], "properties": {"run_id": {"type": "string"}}},
                "Run": {"type": "object", "properties": {k: {} for k in (
                    "run_id", "project_id", "workflow_id", "version", "state", "current_step", "failed_step",
                    "error_code", "error_message", "idempotency_key", "trigger_id", "partition_key", "queue",
                    "epoch", "created_at", "started_at", "finished_at", "duration_ms", "rows", "input", "result",
                    "summary")}},
                "RunHandle": {"type": "object", "properties": {k: {} for k in (
                    "run_id", "created", "key_age_seconds", "workflow_id", "version", "timed_out", "run")}},
                "RunPage": {"type": "object", "properties": {"total": {"type": "integer"},
                                                             "runs": {"type": "array",
                                                                      "items": {"$ref": "#/components/schemas/Run"}}}},
                "RunRequest": {"type": "object", "required": ["workflow", "idempotency_key"], "properties": {
                    "workflow": {"type": "string"}, "input": {}, "idempotency_key": {"type": "string"}}},
                "EventRequest": {"type": "object", "required": ["type", "data", "idempotency_key"], "properties": {
                    "type": {"type": "string"}, "data": {}, "idempotency_key": {"type": "string"},
                    "partition_key": {"type": "string"},
                    "occurred_at": {"type": "string", "format": "date-time"}}},
                "EventResult": {"type": "object", "properties": {
                    "event_id": {"type": "string"}, "created": {"type": "boolean"},
                    "key_age_seconds": {"type": "number"}, "type": {"type": "string"},
                    "idempotency_key": {"type": "string"},
                    "deliveries": {"type": "array", "items": {"type": "object", "properties": {
                        "trigger_id": {"type": "string"},
                        "outcome": {"enum": ["created", "deduplicated", "filtered", "dropped", "dead_lettered"]},
                        "run_id": {"type": ["string", "null"]}}}}}},
                "Partitions": {"type": "object", "properties": {
                    "target": {"type": "string"}, "counts": {"type": "object"},
                    "partitions": {"type": "array", "items": {"type": "object", "properties": {k: {} for k in (
                        "run_id", "workflow_id", "step_id", "partition", "state", "attempts", "rows", "error_code",
                        "error_message", "worker_id", "skipped_by", "skip_reason", "epoch", "started_at",
                        "finished_at", "updated_at", "run_state")}}}}},
                "SkipRequest": {"type": "object", "required": ["reason"], "properties": {
                    "partition": {"type": "string"}, "step": {"type": "string"}, "reason": {"type": "string"}}},
                "CancelRequest": {"type": "object", "properties": {
                    "reason": {"type": "string"}, "compensate": {"type": "boolean", "default": False}}},
                "Cancel": {"type": "object", "properties": {
                    "run_id": {"type": "string"},
                    "outcome": {"type": "string", "enum": ["cancelled", "requested", "already_cancelled"]},
                    "state": {"type": "string"}, "previous_state": {"type": "string"}, "by": {"type": "string"},
                    "reason": {"type": ["string", "null"]}, "compensate": {"type": "boolean"}}},
                "PublishRequest": {"type": "object", "required": ["files"], "properties": {
                    "files": {"type": "object", "additionalProperties": {"type": "string"},
                              "description": "relative path -> YAML text"}}},
            }},
        "paths": {
            "/v1/automation/publish": {"post": {
                "summary": "compile and publish workflow and trigger files (as `a44 automation publish`)",
                "security": auth, "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/PublishRequest"}}}},
                "responses": {"200": _resp("PublishReport (publish --format json)"), **_errors(400, 401, 403, 408, 413, 422)}}},
            "/v1/automation/runs": {
                "post": {"summary": "start a run (idempotency key mandatory); 202 created, 200 deduplicated",
                         "security": auth, "requestBody": {"required": True, "content": {"application/json": {
                             "schema": {"$ref": "#/components/schemas/RunRequest"}}}},
                         "responses": {"202": _resp("created", {"$ref": "#/components/schemas/RunHandle"}),
                                       "200": _resp("deduplicated", {"$ref": "#/components/schemas/RunHandle"}),
                                       **_errors(400, 401, 403, 404, 408, 413)}},
                "get": {"summary": "list runs (as `a44 automation runs --format json`)", "security": auth,
                        "parameters": [_param(n) for n in ("state", "workflow", "step", "since", "limit", "offset")],
                        "responses": {"200": _resp("RunPage", {"$ref": "#/components/schemas/RunPage"}),
                                      **_errors(400, 401, 403)}}},
            "/v1/automation/runs/{run_id}": {"get": {
                "summary": "one run", "security": auth,
                "parameters": [_param("run_id", "path")],
                "responses": {"200": _resp("Run", {"$ref": "#/components/schemas/Run"}),
                              **_errors(400, 401, 403, 404)}}},
            "/v1/automation/runs/{run_id}/logs": {"get": {
                "summary": "attempts of a run; with ?follow=true or Accept: text/event-stream, server-sent events "
                           "until the run ends (resume with Last-Event-ID)",
                "security": auth,
                "parameters": [_param("run_id", "path"), _param("follow"), _param("after"),
                               _param("Last-Event-ID", "header")],
                "responses": {"200": {"description": "{run, attempts} or text/event-stream",
                                      "content": {"application/json": {}, "text/event-stream": {}}},
                              **_errors(400, 401, 403, 404)}}},
            "/v1/automation/runs/{run_id}/skip": {"post": {
                "summary": "skip a failed partition (or step) of a partial or failed run, recording the token's name "
                           "and the reason (as `a44 automation runs skip`)", "security": auth,
                "parameters": [_param("run_id", "path")],
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/SkipRequest"}}}},
                "responses": {"200": _resp("Skip", {"type": "object"}), **_errors(400, 401, 403, 404, 409)}}},
            "/v1/automation/runs/{run_id}/cancel": {"post": {
                "summary": "cancel a run, recording the token's name and the reason: at once when no worker holds "
                           "it, else at the holder's next safe point (as `a44 automation runs cancel`)",
                "security": auth, "parameters": [_param("run_id", "path")],
                "requestBody": {"required": False, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/CancelRequest"}}}},
                "responses": {"200": _resp("Cancel", {"$ref": "#/components/schemas/Cancel"}),
                              **_errors(400, 401, 403, 404, 409)}}},
            "/v1/automation/partitions/{target}": {"get": {
                "summary": "partitions of a run (run_...) or of a workflow's runs, newest run first (as "
                           "`a44 automation partitions --format json`)", "security": auth,
                "parameters": [_param("target", "path"),
                               *[_param(n) for n in ("state", "partition", "step", "limit")]],
                "responses": {"200": _resp("Partitions", {"$ref": "#/components/schemas/Partitions"}),
                              **_errors(400, 401, 403, 404)}}},
            "/v1/automation/logs": {"get": {
                "summary": "attempts of every run of the project, newest first, filtered (as `a44 automation logs "
                           "query --format json`): at most 10,000 rows per answer (limit, default 100); a "
                           "truncated answer has `next`, passed back as `cursor`; archive=true reads the Parquet "
                           "archive",
                "security": auth,
                "parameters": [_param(n) for n in ("error_code", "step", "workflow", "partition_key", "since",
                                                   "until", "limit", "cursor", "archive")],
                "responses": {"200": _resp("LogPage: {source, count, limit, truncated, next, rows}",
                                           {"type": "object", "required": ["rows", "truncated", "next"]}),
                              **_errors(400, 401, 403)}}},
            "/v1/automation/events": {
                "post": {"summary": "publish an event on the bus; 202 created, 200 deduplicated (24 h)",
                         "security": auth, "requestBody": {"required": True, "content": {"application/json": {
                             "schema": {"$ref": "#/components/schemas/EventRequest"}}}},
                         "responses": {"202": _resp("created", {"$ref": "#/components/schemas/EventResult"}),
                                       "200": _resp("deduplicated", {"$ref": "#/components/schemas/EventResult"}),
                                       **_errors(400, 401, 403, 408, 413)}},
                "get": {"summary": "list events", "security": auth,
                        "parameters": [_param(n) for n in ("type", "limit", "offset")],
                        "responses": {"200": _resp("{events: [...]}"), **_errors(400, 401, 403)}}},
            "/v1/automation/whoami": {"get": {
                "summary": "the calling token: token_id, name, project_id, scopes, expires_at (never the token)",
                "security": auth, "responses": {"200": _resp("Principal"), **_errors(401, 403)}}},
            "/v1/automation/events/{event_id}": {"get": {
                "summary": "one event: envelope and deliveries", "security": auth,
                "parameters": [_param("event_id", "path")],
                "responses": {"200": _resp("event"), **_errors(400, 401, 403, 404)}}},
            "/v1/{project}/{trigger}": {"post": {
                "summary": "signed webhook (§9); the body (any JSON, at most 1 MB) becomes the run input",
                "security": [{"webhookSignature": []}],
                "parameters": [
                    _param("project", "path"), _param("trigger", "path"),
                    {"name": "A44-Timestamp", "in": "header", "required": True, "schema": {"type": "string"}},
                    {"name": "A44-Signature", "in": "header", "required": True, "schema": {"type": "string"}},
                    {"name": "A44-Idempotency-Key", "in": "header", "schema": {"type": "string"}}],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}},
                "responses": {"202": _resp("run created", {"$ref": "#/components/schemas/RunId"}),
                              "200": _resp("deduplicated: the original run", {"$ref": "#/components/schemas/RunId"}),
                              "401": _resp("missing or bad signature", _ERR), **_errors(400, 404, 405, 408, 413, 415)}}},
        },
    }
