"""Runs: start, list, read, logs, skip, resolve, replay, partitions, publish, log queries, whoami."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from .common import Age, Body, Doc, Id, NonBlank, Text


class PublishRequest(Body):
    files: dict[str, str] = Field(description="relative path -> YAML text", min_length=1)


class Diagnostic(Doc):
    """A compiler diagnostic, as `lint --format json` prints it (file relative to the uploaded files)."""
    code: str
    severity: Literal["error", "warning"]
    message: str
    file: str | None
    line: int
    col: int
    endLine: int   # camelCase: the names lint's JSON has
    endCol: int
    hint: str | None = None


class Refusal(Doc):
    """Why the store refused a workflow."""
    code: str
    message: str
    hint: str | None = None
    step_id: str | None = None


class PublishedWorkflow(Doc):
    workflow_id: str
    version: int
    sha256: str
    file: str | None
    outcome: Literal["created", "unchanged", "refused"]
    error: Refusal | None = None


class StoredTrigger(Doc):
    trigger_id: str
    type: str
    workflow_id: str
    origin: Literal["standalone", "inline"]
    outcome: Literal["created", "updated", "unchanged"]
    secret_created: bool = False


class PublishReport(Doc):
    project: str
    ok: bool
    files: list[str]
    diagnostics: list[Diagnostic]
    workflows: list[PublishedWorkflow]
    triggers: list[str]
    stored_triggers: list[StoredTrigger]


class RunRequest(Body):
    workflow: str
    input: Any = None
    idempotency_key: str | None = Field(None, description="or the A44-Idempotency-Key header; one is required")


class RunHandle(Doc):
    run_id: str
    created: bool
    key_age_seconds: float
    workflow_id: str
    version: int


class Timer(Doc):
    """An open sleep of the run (§19): its step and the due instant stored when it opened."""
    step_id: str
    attempt: int
    due_at: str


class Run(Doc):
    run_id: str
    workflow_id: str
    version: int
    state: str
    created_at: str
    due_at: str | None = Field(None, description="the earliest due instant of its open sleeps (GET /runs/{id})")
    timers: list[Timer] | None = Field(None, description="its open sleeps, earliest first (GET /runs/{id})")
    carried: dict | None = Field(None, description="the debounced / batched events it carries when a buffer's flush "
                                                   "started it: buffer_id, kind, key, reason, count, events "
                                                   "(GET /runs/{id})")


class Runs(Doc):
    total: int
    runs: list[Run]


class RunLogs(Doc):
    run: Run
    attempts: list[dict]


class Histories(Doc):
    """`runs export`: finished runs of a workflow as histories ({"run": {...}, "attempts": [...]}), redacted like
    results (app/exports.py), oldest first."""
    histories: list[dict]


class SkipRequest(Body):
    """Names what to skip: `partition` (with `step` when several steps have it), or `step`; one of the two is
    required (400 E_PARAMS_INVALID without either)."""
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"required": ["partition"], "properties": {"partition": {"type": "string"}}},
        {"required": ["step"], "properties": {"step": {"type": "string"}}}]})

    reason: NonBlank = Field(description="why, recorded in the log")
    partition: Text | None = Field(None, description="the failed partition (required unless `step` is given)")
    step: Id | None = Field(None, description="the failed step, or the step of `partition` (required unless "
                                              "`partition` is given)")


class CancelRequest(Body):
    reason: Text | None = Field(None, description="why, recorded in the log")
    compensate: bool = Field(False, description="run the completed steps' compensations first")


class SignalRequest(Body):
    data: Any = Field(None, description="the signal's JSON data (at most 256 KB), the waiting step's `signal.data`")
    idempotency_key: Text | None = Field(None, description="a key sent again answers the first signal (`duplicate`)")


class TreeRun(Doc):
    run_id: str
    parent_run_id: str | None
    step_id: str | None
    kind: str | None
    depth: int
    workflow_id: str
    version: int
    state: str
    error_code: str | None
    created_at: str


class RunTree(Doc):
    root_run_id: str
    run_id: str
    runs: list[TreeRun]
    truncated: bool


class SignalResult(Doc):
    run_id: str
    name: str
    seq: int
    outcome: Literal["delivered", "buffered", "duplicate"]
    state: str


class WakeRequest(Body):
    step: Id = Field(description="the sleeping step")
    reason: NonBlank = Field(description="why, recorded in the log")


class RescheduleRequest(Body):
    step: Id = Field(description="the sleeping step")
    until: Age = Field(description="the new due instant: ISO 8601 with its offset (a past one fires at once)")
    reason: Text | None = Field(None, description="why, recorded in the log")


class TimerResult(Doc):
    """A sleep woken or rescheduled: its new due instant, who and why (logged as `event`)."""
    run_id: str
    step_id: str
    due_at: str
    by: str
    reason: str | None = None
    event: Literal["timer.woken", "timer.rescheduled"]


class CancelResult(Doc):
    run_id: str
    outcome: Literal["cancelled", "requested", "already_cancelled"]
    state: str
    previous_state: str | None = None
    by: str | None = None
    reason: str | None = None
    compensate: bool | None = None


class SkipResult(Doc):
    run_id: str
    step_id: str
    partition: str | None
    skipped_by: str
    reason: str
    state: str


class ResolveRequest(Body):
    step: Id = Field(description="the exclusive step awaiting confirmation")
    outcome: Literal["succeeded", "failed", "retry"]


class ReplayRequest(Body):
    run_ids: list[Id] = Field(default_factory=list, max_length=10_000, description="or select with the filters")
    state: Id | None = None
    step: Id | None = None
    since: Age | None = None
    workflow: Id | None = None
    from_step: Id | None = None
    from_time: Age | None = Field(None, description="ISO 8601 instant or an age (2h)")
    failed_partitions: bool = False
    to_version: int | None = Field(None, ge=1, le=2 ** 31 - 1)
    dry_run: bool = False
    rate: Age | None = Field(None, description="hand runs over at most this fast: 10/s, 600/min")
    concurrency: int = Field(16, ge=1, le=100_000, description="daemon concurrency the estimate assumes")
    request_id: Id | None = Field(None, description="default: derived from the selection and the cut")


class ReplayResult(Doc):
    matched: int
    warnings: list[str]


class Partitions(Doc):
    target: str
    counts: dict
    partitions: list[dict]
    next: str | None = None      # a run's: the cursor of the next page (None on the last)
    total: int | None = None     # a run's: its partitions in all
    failed: int | None = None    # a run's: those failed for good (failed or timeout)


class LogPage(Doc):
    source: str
    count: int
    limit: int
    truncated: bool
    next: str | None
    rows: list[dict]
