"""Runtime error codes (`E_...`) and the one exception type that carries them.

Compile-time problems are `Diagnostic`s (diagnostics.py); everything that can go wrong while ingesting or
running is an `A44Error` with a stable code from `CODES`, the one table of what a code means everywhere: whether
it is retryable (§6.3, so the interpreter never has to guess from exception types), the HTTP status the API
answers it with, the exit code of a CLI verb that ends with it, and its title (docs/errors.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The exit codes of the CLI, declared here once (docs/cli.md "Output and exit codes"): every verb and the table below
# use these names. An E_ code ends a verb with EXIT_ERROR or EXIT_USAGE; the others are a verb's own outcomes.
EXIT_OK = 0
EXIT_ERROR = 1          # an error or a refusal (`E_CODE message` on stderr)
EXIT_FINDINGS = 1       # lint, schema and expr found problems in what they were given
EXIT_USAGE = 2          # the command line itself is wrong
EXIT_STOPPED = 3        # `db status`: the embedded server is stopped (as `pg_ctl status`)
EXIT_PLAN_BLOCKED = 3   # `publish --plan`: an open run would be blocked by the new version (a CI gate)
EXIT_TIMEOUT = 124      # `run --wait --timeout` elapsed before the run ended (as coreutils `timeout`)


@dataclass(frozen=True)
class ErrorCode:
    code: str
    retryable: bool
    title: str
    http_status: int = 500      # a code the API has no better answer for is its failure, not the caller's
    exit_code: int = EXIT_ERROR  # EXIT_USAGE: the command line itself is wrong (docs/cli.md "Exit codes")
    public_details: bool = False  # the REST error body carries the error's `details` (only what the caller sent)


CODES: dict[str, ErrorCode] = {}


def _code(code: str, retryable: bool, title: str, *, http: int = 500, exit: int = EXIT_ERROR,
          details: bool = False) -> str:
    assert code not in CODES, f"{code} registered twice"
    CODES[code] = ErrorCode(code, retryable, title, http, exit, details)
    return code


def http_status(code: str) -> int:
    """The HTTP status of an error code (500 for a code not in the table)."""
    info = CODES.get(code)
    return info.http_status if info is not None else 500


def public_details(code: str) -> bool:
    """Whether the REST API answers this error with its `details` (the remote CLI then shows what the local one
    does); other codes keep theirs to the server."""
    info = CODES.get(code)
    return info is not None and info.public_details


def exit_code(code: str) -> int:
    """The exit code of a CLI verb that ends with this error (1 for a code not in the table)."""
    info = CODES.get(code)
    return info.exit_code if info is not None else EXIT_ERROR


# Steps and connectors (§6, §14)
E_STEP_TIMEOUT = _code("E_STEP_TIMEOUT", True, "the step did not finish within its timeout")
E_NETWORK = _code("E_NETWORK", True, "the connection to the far side failed")
E_TUNNEL_DOWN = _code("E_TUNNEL_DOWN", True, "the private network route is unavailable; no fallback is taken")
E_CIRCUIT_OPEN = _code("E_CIRCUIT_OPEN", True, "the connector's circuit breaker is open")
E_UPSTREAM_429 = _code("E_UPSTREAM_429", True,
                       "the far side asked to slow down (429, or 503 with Retry-After): the connector's flow key is "
                       "paused until then for every run, and the step waits without using retry budget "
                       "([flow.md](flow.md))")
E_FLOW_KEY_INVALID = _code("E_FLOW_KEY_INVALID", False,
                           "a flow-control key (debounce, batch, concurrency, throttle, rateLimit; a priority or "
                           "weight) cannot be computed from the event or input: the envelope goes to the DLQ, never "
                           "to a shared default bucket", http=422)
# attempts refused for the far side's or the connector's state, not the step's fault: retried without using budget
FREE_RETRY_CODES = frozenset({E_CIRCUIT_OPEN, E_UPSTREAM_429})
E_CONNECTOR_NOT_FOUND = _code("E_CONNECTOR_NOT_FOUND", False, "the step's connector is not installed")
E_UNMOCKED_CONNECTOR = _code("E_UNMOCKED_CONNECTOR", False,
                             "under the test kit, a step used a connector that reaches the outside world and the "
                             "test mocks no such connector (docs/testkit.md)")
E_CONNECTOR_FAILED = _code("E_CONNECTOR_FAILED", False, "the connector raised an unexpected error")
E_PARAMS_INVALID = _code("E_PARAMS_INVALID", False, "parameters failed validation: a step's rendered parameters, "
                         "or a request's (a skip that names neither a partition nor a step)", http=400)
E_TEMPLATE = _code("E_TEMPLATE", False, "a template could not be rendered at run time", http=422)
E_TEMPLATE_LIMIT = _code("E_TEMPLATE_LIMIT", False,
                         "a template passed a rendering limit (output size, loop iterations, range, repetition, "
                         "format width, nesting or time); the message names the limit and the value", http=422)
E_RESULT_TOO_LARGE = _code("E_RESULT_TOO_LARGE", False, "the step result could not be stored")
E_LEASE_EXPIRED = _code("E_LEASE_EXPIRED", True, "the worker's lease expired before the step was recorded")
E_EXCLUSIVE_UNCONFIRMED = _code("E_EXCLUSIVE_UNCONFIRMED", False,
                                "an exclusive step lost its lease; a person must confirm the outcome")
E_COMPENSATION_FAILED = _code("E_COMPENSATION_FAILED", False, "a compensation exhausted its budget")
E_NONDETERMINISTIC_REPLAY = _code("E_NONDETERMINISTIC_REPLAY", False,
                                  "the code workflow's step sequence differs from the recorded one")
E_RUN_DEADLINE = _code("E_RUN_DEADLINE", False,
                       "the run exceeded its wall-clock limit (the workflow's timeout or maxDuration, default 72 h)")
# Durable timers (§19): both permanent, decided when the sleep opens; its due instant is never silently cut
E_SLEEP_INVALID = _code("E_SLEEP_INVALID", False,
                        "a sleep's templated `until` rendered to no instant with a UTC offset (naive or unparseable)")
E_SLEEP_EXCEEDS_RUN_DEADLINE = _code("E_SLEEP_EXCEEDS_RUN_DEADLINE", False,
                                     "a sleep's due instant is past the run's deadline (its `maxDuration`, "
                                     "default 72 h)", http=422)
E_TIMER_NOT_SLEEPING = _code("E_TIMER_NOT_SLEEPING", False,
                             "that step of the run is not an open sleep, or its due instant has come (the timer "
                             "fires): nothing to wake or reschedule", http=409)
E_ILLEGAL_TRANSITION = _code("E_ILLEGAL_TRANSITION", False,
                              "the run state machine does not allow that transition (docs/states.md)", http=409)
E_CONFIRMED_FAILED = _code("E_CONFIRMED_FAILED", False,
                           "a person confirmed that an interrupted exclusive step failed")
E_RUN_CANCELLED = _code("E_RUN_CANCELLED", False, "a person cancelled the run (who and why are in its log)")
E_CANCEL_NOT_ALLOWED = _code("E_CANCEL_NOT_ALLOWED", False,
                             "the run is finished, or compensating after a failure: it cannot be cancelled", http=409)

# Waits and signals (§20, docs/waits.md)
E_WAIT_TIMEOUT = _code("E_WAIT_TIMEOUT", False, "a wait step's timeout came before what it waited for (onTimeout: fail)")
E_SIGNAL_RUN_FINISHED = _code("E_SIGNAL_RUN_FINISHED", False, "the run is finished: it takes no more signals",
                              http=409, details=True)
E_SIGNAL_TOO_LARGE = _code("E_SIGNAL_TOO_LARGE", False, "the signal's data is over 256 KB", http=413)
E_SIGNAL_INVALID = _code("E_SIGNAL_INVALID", False, "the signal's name or data is not valid", http=400,
                         exit=EXIT_USAGE)

# Child workflows (§21, docs/children.md)
E_CHILD_FAILED = _code("E_CHILD_FAILED", False, "the child workflow run ended without succeeding (its run id and "
                       "code are in details)", details=True)
E_CHILD_TIMEOUT = _code("E_CHILD_TIMEOUT", False, "the child workflow did not end within the step's timeout")
E_CHILD_INPUT_INVALID = _code("E_CHILD_INPUT_INVALID", False,
                              "the child's input could not be rendered or was refused; no child was created")
E_CHILD_LIMIT = _code("E_CHILD_LIMIT", False, "a child workflow limit (depth 8, 10,000 child runs per tree) or a "
                      "target not published")
# Human approval (§20, docs/approvals.md)
E_APPROVAL_REJECTED = _code("E_APPROVAL_REJECTED", False,
                            "an approver rejected the step (or its timeout came first, onTimeout: reject)")
E_SELF_APPROVAL = _code("E_SELF_APPROVAL", False, "the run's initiator cannot approve it (the step has no allowSelf)",
                        http=403)
E_NOT_APPROVER = _code("E_NOT_APPROVER", False, "this person is not a member of the step's approver groups",
                       http=403)
E_APPROVAL_CLOSED = _code("E_APPROVAL_CLOSED", False, "the approval is closed (decided, timed out or cancelled)",
                          http=409, details=True)
E_APPROVAL_NOT_FOUND = _code("E_APPROVAL_NOT_FOUND", False, "the run has no approval request at that step",
                             http=404)
E_APPROVAL_INVALID = _code("E_APPROVAL_INVALID", False, "the decision is not valid (approve | reject, a comment of "
                           "at most 4000 characters)", http=400, exit=EXIT_USAGE)
E_APPROVAL_LINK_INVALID = _code("E_APPROVAL_LINK_INVALID", False,
                                "the approval link is not one this server signed (altered or forged)", http=403)
E_APPROVAL_LINK_EXPIRED = _code("E_APPROVAL_LINK_EXPIRED", False, "the approval link has expired", http=410)
E_APPROVAL_LINK_USED = _code("E_APPROVAL_LINK_USED", False, "the approval link was used already (single use)",
                             http=409)

# Expressions at run time (§5): evaluation errors are values inside CEL; this is the code a step gets when
# an `if` expression ends in an error.
E_EXPR_EVAL = _code("E_EXPR_EVAL", False, "an expression could not be evaluated")

# Ingestion (§8, §9, §10)
E_IDEMPOTENCY_KEY_REQUIRED = _code("E_IDEMPOTENCY_KEY_REQUIRED", False, "manual runs need --idempotency-key",
                                   http=400, exit=EXIT_USAGE)
E_ENVELOPE_INVALID = _code("E_ENVELOPE_INVALID", False, "the event envelope could not be deserialized", http=400)
E_EVENT_TOO_OLD = _code("E_EVENT_TOO_OLD", False, "the event is older than the trigger's deliver.maxAge")
E_TIMESTAMP_SKEW = _code("E_TIMESTAMP_SKEW", False, "the webhook timestamp is more than 300 s from the clock", http=408)
E_SIGNATURE_INVALID = _code("E_SIGNATURE_INVALID", False, "the webhook signature is missing or wrong", http=401)

# Publishing and the store
E_WORKFLOW_NOT_FOUND = _code("E_WORKFLOW_NOT_FOUND", False, "no published workflow has that id", http=404)
E_VERSION_CONFLICT = _code("E_VERSION_CONFLICT", False, "that version was published with other steps", http=409)
E_VERSION_REGRESSION = _code("E_VERSION_REGRESSION", False, "a higher version of that workflow is published", http=409)
E_VERSION_HAS_OPEN_RUNS = _code("E_VERSION_HAS_OPEN_RUNS", False, "that workflow version still has open runs: "
                                "it cannot be retired (move them with --migrate-to N)", http=409)
E_VERSION_NOT_NEWER = _code("E_VERSION_NOT_NEWER", False, "runs migrate moves runs to a newer published version only",
                            http=409)
E_RUN_NOT_FOUND = _code("E_RUN_NOT_FOUND", False, "no run has that id", http=404)
E_ATTEMPT_NOT_FOUND = _code("E_ATTEMPT_NOT_FOUND", False, "the run has no attempt with that step, epoch, kind and number",
                            http=404)
E_RESULT_UNAVAILABLE = _code("E_RESULT_UNAVAILABLE", False, "the attempt's stored result cannot be read (its object is "
                             "missing or corrupt)", http=404)
E_DB_UNAVAILABLE = _code("E_DB_UNAVAILABLE", True, "the PostgreSQL database cannot be reached", http=503)
E_DB = _code("E_DB", False, "the database refused an operation")
E_DB_POOLER = _code("E_DB_POOLER", False,
                    "a connection that must be one server session (LISTEN/NOTIFY, session advisory locks) goes "
                    "through a transaction pooler; set A44_DATABASE_SESSION_URL to one that bypasses it")
E_DB_SCHEMA = _code("E_DB_SCHEMA", False,
                    "the database schema is missing or does not match this package; run `a44 automation db migrate`")
E_DB_SCHEMA_RANGE = _code("E_DB_SCHEMA_RANGE", False,
                          "the database's schema is outside the range this daemon runs against: upgrade the daemon, "
                          "or apply its migrations with `a44 automation db migrate`")

# The sql/execute connector (§14): the user's statement, as opposed to the store's own queries (E_DB)
E_SQL = _code("E_SQL", False, "the step's SQL statement was refused by the database")
E_SQL_CONFLICT = _code("E_SQL_CONFLICT", True,
                       "the step's SQL statement hit a serialization failure, deadlock or lock timeout")
E_SQL_FORBIDDEN = _code("E_SQL_FORBIDDEN", False,
                        "the workflow database's role may not do what the step's SQL statement asks")
E_SQL_NO_DATABASE = _code("E_SQL_NO_DATABASE", False,
                          "the step names no database and no application database is configured")
E_SQL_UNSAFE_DATABASE = _code("E_SQL_UNSAFE_DATABASE", False,
                              "the step's database is the control store or its role has server-level powers")

E_PARTITIONS_INVALID = _code("E_PARTITIONS_INVALID", False,
                             "a fan-out step's partitions are not a list of keys or a valid date range")
E_PARTITIONS_FAILED = _code("E_PARTITIONS_FAILED", False, "partitions of a fan-out step failed after their retries")
E_SKIP_NOT_ALLOWED = _code("E_SKIP_NOT_ALLOWED", False,
                           "only a permanently failed partition or step of a finished run can be skipped", http=409)
E_UNKNOWN_PARTITION = _code("E_UNKNOWN_PARTITION", False, "the run has no such partition", http=404)
E_PARTITION_BUSY = _code("E_PARTITION_BUSY", False,
                         "another run was processing the partition: skipped here (`onConflict: skip`)", http=409)


class A44Error(Exception):
    """An error a user can see: a stable code, what happened, and what to do next."""

    def __init__(self, code: str, message: str, *, step_id: str | None = None, hint: str | None = None,
                 details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.step_id = step_id
        self.hint = hint
        self.details = details or {}

    @property
    def retryable(self) -> bool:
        info = CODES.get(self.code)
        if info is not None:
            return info.retryable
        # E_UPSTREAM_<status>: retryable for the statuses of §6.3 only
        if self.code.startswith("E_UPSTREAM_"):
            return self.code[len("E_UPSTREAM_"):] in {"408", "429", "500", "502", "503", "504"}
        return False

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.step_id:
            d["step_id"] = self.step_id
        if self.hint:
            d["hint"] = self.hint
        return d

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" + (f" (hint: {self.hint})" if self.hint else "")

# The connector library (§14, §15, §17)
E_SECRET_NOT_FOUND = _code("E_SECRET_NOT_FOUND", False, "a referenced secret is not defined in any secret source")
E_SECRET_KEY_SHORT = _code("E_SECRET_KEY_SHORT", False, "the secret key is not hexadecimal or shorter than 32 bytes")
E_SECRET_KEY_PERMISSIONS = _code("E_SECRET_KEY_PERMISSIONS", False,
                                 "a secret key file is readable or writable by group or others; chmod 600 it")
E_SECRET_KEY_MISMATCH = _code("E_SECRET_KEY_MISMATCH", False,
                              "the available keys cannot decrypt a stored secret; writes are refused")
E_SECRET_FILE_INVALID = _code("E_SECRET_FILE_INVALID", False, "the secret file is not a secret file this version reads")
E_AUTH_FAILED = _code("E_AUTH_FAILED", False, "the connector could not obtain credentials (e.g. an OAuth2 token)")
E_BOT_INVALID_ANSWER = _code("E_BOT_INVALID_ANSWER", True, "the model's answer failed the step's schema")
E_STORAGE = _code("E_STORAGE", False, "the object store refused or failed an operation")
E_STORAGE_NOT_FOUND = _code("E_STORAGE_NOT_FOUND", False, "no object has that key", http=404)

# Requests refused at the HTTP and CLI edges (§9, §17): what the caller sent, not the run, is wrong
E_INVALID_ARGUMENT = _code("E_INVALID_ARGUMENT", False, "an argument or request field is missing or malformed",
                           http=400, exit=EXIT_USAGE)
E_BAD_INPUT = _code("E_BAD_INPUT", False, "an input line or value could not be read", http=400, exit=EXIT_USAGE)
E_FILE_ACCESS = _code("E_FILE_ACCESS", False, "a file the command reads or writes cannot be accessed")
E_BODY_TOO_LARGE = _code("E_BODY_TOO_LARGE", False,
                         "the request body is over the endpoint's limit (webhooks 1 MB, the REST API 8 MB)", http=413)
E_METHOD_NOT_ALLOWED = _code("E_METHOD_NOT_ALLOWED", False,
                            "the endpoint does not accept that method (a webhook endpoint: POST only)", http=405)
E_BAD_REQUEST = _code("E_BAD_REQUEST", False,
                      "a path, query or header parameter has characters, a length or a value the API refuses", http=400)
E_NOT_FOUND = _code("E_NOT_FOUND", False, "no endpoint has that path", http=404)
E_REQUEST_TIMEOUT = _code("E_REQUEST_TIMEOUT", True, "the request body did not arrive within the body timeout",
                          http=408)
E_SERVER_BUSY = _code("E_SERVER_BUSY", True, "the server is at its connection limit", http=503)
E_INTERNAL = _code("E_INTERNAL", True,
                   "the server failed unexpectedly; its log has the line with the answer's correlation id")
E_HTTP_BIND = _code("E_HTTP_BIND", False, "the HTTP plane cannot listen on that address and port (in use, not local)")
E_HTTP_HOST_UNSAFE = _code("E_HTTP_HOST_UNSAFE", False,
                           "a non-loopback --host needs --metrics-token-required (docs/api.md \"Listening address\")",
                           exit=EXIT_USAGE)
E_UNSUPPORTED_MEDIA_TYPE = _code("E_UNSUPPORTED_MEDIA_TYPE", False, "only Content-Type: application/json is accepted",
                                 http=415)
E_HEADER_DUPLICATED = _code("E_HEADER_DUPLICATED", False, "a header that must appear once appeared twice", http=400)
E_TRIGGER_NOT_FOUND = _code("E_TRIGGER_NOT_FOUND", False, "no active trigger has that id in that project", http=404)
E_EVENT_NOT_FOUND = _code("E_EVENT_NOT_FOUND", False, "no event has that id", http=404)
E_EVENT_ID_CONFLICT = _code("E_EVENT_ID_CONFLICT", False, "that event id was published with another envelope",
                            http=409)
E_SECRET_ALREADY_SHOWN = _code("E_SECRET_ALREADY_SHOWN", False,
                               "a webhook secret is shown once; rotate it to get a new one", http=409)
E_TOKEN_INVALID = _code("E_TOKEN_INVALID", False, "the API token is missing, unknown, expired or revoked", http=401)
E_TOKEN_NOT_FOUND = _code("E_TOKEN_NOT_FOUND", False, "no API token has that name", http=404)
E_FORBIDDEN = _code("E_FORBIDDEN", False, "the token's scope or allowed networks do not cover this request", http=403)
# The web console (docs/console.md)
E_CONSOLE_UNREACHABLE = _code("E_CONSOLE_UNREACHABLE", True, "no a44 daemon answers where `a44 automation console` "
                               "looked (serve --http-port is not running there)", http=503)
E_CSRF_INVALID = _code("E_CSRF_INVALID", False, "a console form was posted without its CSRF token, or with a wrong one",
                       http=403)
# The CLI against a remote daemon (docs/api.md "Remote mode")
E_API_UNAVAILABLE = _code("E_API_UNAVAILABLE", True, "the remote a44 API cannot be reached")
E_API = _code("E_API", False, "the remote a44 API answered with something that is not an a44 answer")
E_NOT_LOGGED_IN = _code("E_NOT_LOGGED_IN", False,
                        "no credentials for this project and server; run `a44 auth login`")
E_REMOTE_UNSUPPORTED = _code("E_REMOTE_UNSUPPORTED", False,
                             "this verb works against the database only, not against a remote daemon")

# Replay (§13) and workflows in code (§12)
E_REPLAY_NOT_TERMINAL = _code("E_REPLAY_NOT_TERMINAL", False, "only a run that has ended can be replayed",
                              http=409)
E_REPLAY_UNKNOWN_STEP = _code("E_REPLAY_UNKNOWN_STEP", False, "the replay cut names a step the workflow does not have",
                              http=400)
E_REPLAY_VERSION_MISMATCH = _code("E_REPLAY_VERSION_MISMATCH", False,
                                  "--to-version changes a step before the cut; results cannot be reused", http=409)
E_CODE_WORKFLOW = _code("E_CODE_WORKFLOW", False, "the code workflow raised outside of a step")
E_EXPECTATION_FAILED = _code("E_EXPECTATION_FAILED", False,
                             "a step's or the workflow's `expect:` did not hold (e.g. `rows.in > 0` on empty data); "
                             "the message names the expectation and the values it saw")
E_CODE_UNAVAILABLE = _code("E_CODE_UNAVAILABLE", False,
                           "the code workflow's module cannot be imported or changed since it was published")


# Queues and the dead-letter queue (§10)
E_QUEUE_NOT_FOUND = _code("E_QUEUE_NOT_FOUND", False, "no published queue has that id", http=404)
E_DLQ_NOT_FOUND = _code("E_DLQ_NOT_FOUND", False, "no dead letter has that id", http=404)

# Flow control (§22, docs/flow.md)
E_FLOW_KEY_NOT_FOUND = _code("E_FLOW_KEY_NOT_FOUND", False, "no flow key of that name is paused in the project",
                             http=404)
E_FLOW_PAUSE_INVALID = _code("E_FLOW_PAUSE_INVALID", False,
                             "a flow pause needs a key and an `--until` instant in the future (at most 30 days ahead)",
                             http=400, exit=EXIT_USAGE)
E_FLOW_KEYS_EXHAUSTED = _code("E_FLOW_KEYS_EXHAUSTED", False,
                              "a flow limit already has 1,000,000 live keys; a run with a new key is refused",
                              http=429)
E_FLOW_RATE_LIMITED = _code("E_FLOW_RATE_LIMITED", False,
                            "the workflow's rateLimit for this key is used up: the run was skipped", http=429)
E_DLQ_FILTER = _code("E_DLQ_FILTER", False, "the --filter expression does not compile", http=400, exit=EXIT_USAGE,
                     details=True)

# The engine's settings (docs/runtime.md)
E_SYNCHRONOUS_COMMIT = _code("E_SYNCHRONOUS_COMMIT", False, "A44_SYNCHRONOUS_COMMIT is neither `on` nor `off`",
                             exit=EXIT_USAGE)

# Observability (§16)
E_OTEL_UNAVAILABLE = _code("E_OTEL_UNAVAILABLE", False,
                           "the OTEL_* variables ask for traces the process cannot export (SDK not installed, "
                           "protocol not OTLP/HTTP)", exit=EXIT_USAGE)
# Log queries and retention (docs/observability.md "Log queries")
E_LOG_LIMIT = _code("E_LOG_LIMIT", False, "a log query asks for more than 10,000 rows per answer; page with --after",
                    http=400, exit=EXIT_USAGE)
E_LOG_CURSOR = _code("E_LOG_CURSOR", False, "the --after cursor is not one a log query printed", http=400,
                     exit=EXIT_USAGE)
E_ARCHIVE_UNAVAILABLE = _code("E_ARCHIVE_UNAVAILABLE", False,
                              "the log archive needs pyarrow: pip install 'anthares44-automation[archive]'", http=501)
E_ARCHIVE = _code("E_ARCHIVE", False, "the log archive could not be read or written (the message says which file)")

# Notification channels and their delivery (docs/notifications.md)
E_CHANNEL_NOT_FOUND = _code("E_CHANNEL_NOT_FOUND", False, "no notification channel has that name", http=404)
E_CHANNEL_EXISTS = _code("E_CHANNEL_EXISTS", False, "a notification channel of that name exists already", http=409)
E_CHANNEL_INVALID = _code("E_CHANNEL_INVALID", False,
                          "a notification channel's type or configuration is wrong (URL, addresses, SMTP server)",
                          http=400, exit=EXIT_USAGE)
E_NOTIFICATION_NOT_FOUND = _code("E_NOTIFICATION_NOT_FOUND", False, "no notification has that id", http=404)
E_NOTIFICATION_DELIVERED = _code("E_NOTIFICATION_DELIVERED", False,
                                 "the notification was delivered already; it is never sent again", http=409)
E_NOTIFY_REFUSED = _code("E_NOTIFY_REFUSED", False,
                         "the receiver refused the notification for good (HTTP 4xx other than 408/429, SMTP 5xx)")
E_NOTIFY_UNAVAILABLE = _code("E_NOTIFY_UNAVAILABLE", True,
                             "the receiver could not take the notification now (timeout, connection, HTTP "
                             "408/429/5xx, SMTP 4xx); it is retried with backoff")

# Alerts (§16, docs/alerts.md)
E_ALERT_METRIC = _code("E_ALERT_METRIC", False, "an alert rule names a metric alerts cannot be evaluated on",
                       http=400, exit=EXIT_USAGE)
E_ALERT_FILTER = _code("E_ALERT_FILTER", False, "an alert rule's label filter does not parse or names an unknown label",
                       http=400, exit=EXIT_USAGE)
E_ALERT_CONDITION = _code("E_ALERT_CONDITION", False, "an alert rule's condition does not parse", http=400,
                          exit=EXIT_USAGE)
E_ALERT_RULE_INVALID = _code("E_ALERT_RULE_INVALID", False,
                             "an alert rule's name, severity, window or update count is not valid", http=400,
                             exit=EXIT_USAGE)
E_ALERT_CHANNEL_UNKNOWN = _code("E_ALERT_CHANNEL_UNKNOWN", False,
                                "an alert rule notifies a channel the project does not have", http=400,
                                exit=EXIT_USAGE)
E_ALERT_RULE_NOT_FOUND = _code("E_ALERT_RULE_NOT_FOUND", False, "no alert rule has that name", http=404)

def _markdown() -> str:
    """docs/errors.md, generated: `python -m anthares44.automation.errors > docs/errors.md`."""
    lines = ["# Runtime error codes", "",
             "Every error a run, a request or a command can end with has one of these stable codes (compile-time",
             "problems are diagnostics `A44xxx`: [diagnostics.md](diagnostics.md)). *Retryable* says whether a step",
             "failing with it is retried within its `retry` budget (§6.3). `E_UPSTREAM_<status>` (HTTP answers: "
             "retryable",
             "for 408, 429, 500, 502, 503, 504) and `E_EXPR_*` (CEL evaluation, reported on a step as `E_EXPR_EVAL`) "
             "are",
             "families. Regenerate with `python -m anthares44.automation.errors > docs/errors.md`; "
             "`tests/test_error_codes.py` keeps it true.", "",
             "*HTTP* is the status the REST API and the webhook endpoint answer with; *exit* the exit code of a CLI",
             "verb that ends with the error (2: the command line itself is wrong). A code marked *(details)* carries",
             "its `details` in the REST error body too (`{\"error\": {\"code\", \"message\", \"hint\", \"details\"}}`).", "",
             "| code | retryable | HTTP | exit | meaning |", "|---|---|---|---|---|"]
    lines += [f"| `{c}` | {'yes' if i.retryable else 'no'} | {i.http_status} | {i.exit_code} | {i.title}"
              f"{' *(details)*' if i.public_details else ''} |"
              for c, i in CODES.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(_markdown(), end="")
