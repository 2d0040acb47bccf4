"""The IR (§4.1): the frozen, versioned, hashed form of a workflow that the interpreter reads, and nothing else.

Every default is resolved here, so the interpreter never consults the YAML models. Durations are integer
milliseconds; expressions are compiled CEL in serialisable form; template strings are wrapped as
`{"$tpl": "..."}` so the runtime renders exactly those and nothing else. `sha256` covers the canonical JSON of
the document without `sha256` and without `source` (moving a file does not change a definition).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

IR_VERSION = 1
DEFAULT_LEASE_MS = 30_000
DEFAULT_RETRY_BASE_MS = 1_000
DEFAULT_RETRY_CAP_MS = 300_000
COMPENSATION_DELAYS_MS = (5_000, 20_000, 60_000)   # §6.1: 3 attempts, waiting 5 s, 20 s, 60 s
RUN_DEADLINE_MS = 72 * 3600 * 1000     # a run's wall-clock limit unless its maxDuration says otherwise (§19)
DEFAULT_QUEUE = "q_default"
DEFAULT_CONCURRENCY = 100
DEFAULT_SINCE_MAX = 366        # partitions in one run's plan of a `since: lastSuccess` range


class IR(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Optional(IR):
    """IR whose `OPTIONAL` fields are left out of its JSON while empty, so adding them kept the sha256 of every
    definition that does not use them (a republished unchanged version stays the same version)."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _drop_empty(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        doc: dict[str, Any] = handler(self)
        for key in self.OPTIONAL:
            if key in doc and doc[key] in (None, (), []):
                del doc[key]
        return doc


class Expr(IR):
    cel: str
    program: dict[str, Any]


class RetryIR(IR):
    max: int
    strategy: Literal["exponential-jitter", "fixed", "none"]
    base_ms: int
    cap_ms: int


class ConnectorRef(IR):
    uses: str
    kind: Literal["builtin", "declared", "plugin", "unresolved"]
    type: str | None
    config: dict[str, Any] | None = None   # a declared instance's configuration, snapshotted at publish


class CompensationIR(IR):
    connector: ConnectorRef
    timeout_ms: int
    params: dict[str, Any]
    attempts: int = len(COMPENSATION_DELAYS_MS)
    delays_ms: tuple[int, ...] = COMPENSATION_DELAYS_MS


MAX_ITEMS = 100_000      # SPEC §21: the items of one fan-out (YAML `foreach`, code `step.map`)


class PartitionsIR(_Optional):
    """Fan-out of a call node: the partition keys come from `foreach` (a CEL list) or the range `range_from`..
    `range_to` (CEL, ISO dates or date-times) by `every_ms`; at most `concurrency` partitions run at once. With
    `since` = "last_success" the range starts at what the step has not processed yet (from `initial`), at most
    `max` keys."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ("since", "initial", "max", "on_conflict", "key")
    foreach: Expr | None
    range_from: Expr | None
    range_to: Expr | None
    every_ms: int | None
    concurrency: int
    on_failure: Literal["partial", "fail", "compensate"]
    since: Literal["last_success"] | None = None
    initial: str | None = None
    max: int | None = None
    on_conflict: Literal["skip"] | None = None     # None: wait for the run processing a partition to finish it
    key: Expr | None = None      # with `foreach`: CEL over `item` naming each item's partition key (item_plan.py)


class SleepIR(_Optional):
    """A sleep that is not a fixed `sleep_ms` (§19). `until`: an ISO instant with its offset, or a template
    ({"$tpl"}) rendered when the sleep opens. `for`: `months` and `days` added in local wall time of `tz` (month
    ends clamped; a gap or fold resolved by `dst_policy`), then `ms` elapsed. The runtime computes the due instant
    once, when the sleep opens, with core calendar.py (`due_for(opened_at, Span(months, days, ms), tz, dst_policy)`,
    `parse_instant(until)`), and stores it."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ("until", "months", "days", "ms", "tz", "dst_policy")
    kind: Literal["until", "for"]
    until: str | dict[str, Any] | None = None
    months: int | None = None
    days: int | None = None
    ms: int | None = None
    tz: str | None = None
    dst_policy: Literal["skip-nonexistent", "run-once", "run-twice"] | None = None


class WaitBranchIR(_Optional):
    """One branch of a `wait: {any: [...]}`: `kind: event` (the fields of an event wait), `signal`, or `sleep`
    (`sleep_ms` after the wait opened)."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ("signal", "event", "correlate_run", "correlate_event", "condition",
                                           "since", "lookback_ms", "sleep_ms")
    kind: Literal["signal", "event", "sleep"]
    signal: str | None = None
    event: str | None = None
    correlate_run: Expr | None = None
    correlate_event: Expr | None = None
    condition: Expr | None = None
    since: Literal["run_start", "wait_open", "lookback"] | None = None
    lookback_ms: int | None = None
    sleep_ms: int | None = None


class WaitIR(_Optional):
    """A `wait` step (§20, docs/waits.md), at most `timeout_ms` after it opens; then `on_timeout` fails the step
    (E_WAIT_TIMEOUT) or continues with output `{"kind": "timeout"}`. `kind: signal`: for one signal named
    `signal` sent to the run. `kind: event`: for an event of type `event` whose `correlate_event` value (CEL over
    the envelope) equals the run's `correlate_run` value (both None: a broadcast wait) and that passes
    `condition`; `since` is `run_start`, `wait_open` or `lookback` (`lookback_ms` before the run's creation).
    `kind: any`: the first of `branches` (without a `timeout`, `timeout_ms` is the run's wall-clock limit)."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ("signal", "event", "correlate_run", "correlate_event", "condition",
                                           "since", "lookback_ms", "branches")
    kind: Literal["signal", "event", "any"]
    signal: str | None = None
    event: str | None = None
    correlate_run: Expr | None = None
    correlate_event: Expr | None = None
    condition: Expr | None = None
    since: Literal["run_start", "wait_open", "lookback"] | None = None
    lookback_ms: int | None = None
    branches: tuple[WaitBranchIR, ...] = ()
    timeout_ms: int
    on_timeout: Literal["fail", "continue"]


class ChildIR(_Optional):
    """A child-workflow step (§21, `uses: workflow/NAME`, docs/children.md): one run of `workflow_id` at the
    `version` pinned when the parent was published, with `input` (templates rendered when the step starts), created
    in the transaction that records the parent's attempt. `wait`: `result` (the step ends with the child), `started`
    (when the child is first leased) or `none` (at once, output the child's run id); `timeout_ms` bounds the wait,
    after which the child is cancelled unless `on_timeout` is `keep`. `on_parent_cancel`: `cancel` cascades a
    cancel of the parent to the child, `abandon` lets it run on. `compensate`: a workflow started once, with the
    child's output as input, when the parent's saga undoes this step."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ("compensate_workflow_id", "compensate_version")
    workflow_id: str
    version: int
    input: Any
    wait: Literal["result", "started", "none"]
    timeout_ms: int
    on_timeout: Literal["cancel", "keep"]
    on_parent_cancel: Literal["cancel", "abandon"]
    compensate_workflow_id: str | None = None
    compensate_version: int | None = None


class ApprovalIR(IR):
    """An `approval` step (§20, docs/approvals.md): `min` distinct members of `groups` (approver groups, resolved
    from the project's published `kind: approvers` when a person decides) approve within `timeout_ms`; reminders
    `remind_ms` after it opens; after `escalate_after_ms` the members of `escalate_groups` may decide too;
    `on_timeout` rejects (E_APPROVAL_REJECTED), fails (E_WAIT_TIMEOUT) or continues; messages go to channel
    `notify`; `allow_self` lets the run's initiator approve."""
    groups: tuple[str, ...]
    min: int
    timeout_ms: int
    remind_ms: tuple[int, ...]
    escalate_after_ms: int | None
    escalate_groups: tuple[str, ...]
    on_timeout: Literal["reject", "fail", "continue"]
    notify: str | None
    allow_self: bool


class NodeIR(_Optional):
    OPTIONAL: ClassVar[tuple[str, ...]] = ("rows", "expect", "partitions", "sleep", "wait", "child", "approval")
    id: str
    index: int
    kind: Literal["call", "sleep", "wait", "child", "approval"]
    connector: ConnectorRef | None
    timeout_ms: int | None
    retry: RetryIR
    compensate: CompensationIR | None
    condition: Expr | None
    exclusive: bool
    sleep_ms: int | None
    params: dict[str, Any]
    rows: dict[str, Expr] | None = None      # in | out | error -> CEL over result, input (§16, docs/rows.md)
    expect: tuple[Expr, ...] = ()             # checked when the step succeeds
    partitions: PartitionsIR | None = None
    sleep: SleepIR | None = None              # kind "sleep" with no sleep_ms: a `for` span or an `until` instant
    wait: WaitIR | None = None                # kind "wait"
    child: ChildIR | None = None              # kind "child"
    approval: ApprovalIR | None = None        # kind "approval"


class DeliverIR(IR):
    max_age_ms: int | None
    drop_on_filter_miss: bool


class CatchUpIR(IR):
    enabled: bool
    max_occurrences: int
    max_age_ms: int | None


class TriggerIR(IR):
    id: str
    type: Literal["event", "webhook", "schedule", "manual"]
    workflow_id: str
    event: str | None = None
    filter: Expr | None = None
    deliver: DeliverIR | None = None
    partition_key: Any = None
    cron: str | None = None
    tz: str | None = None
    dst_policy: Literal["skip-nonexistent", "run-once", "run-twice"] | None = None
    overlap: Literal["skip", "queue", "allow"] | None = None
    catch_up: CatchUpIR | None = None
    input: dict[str, Any] | None = None


class ConcurrencyIR(IR):
    max: int
    partition_key: Any = None


class KeyLimitIR(IR):
    """One `concurrency` entry with a key (§22): `key` CEL over `input`; `scope` project: shared by workflows."""
    key: Expr
    limit: int
    scope: Literal["workflow", "project"] = "workflow"
    hold: bool = False            # holdWhileWaiting: the slot stays while the run is parked


class WindowIR(IR):
    """`throttle` (starts wait for a token) or `rateLimit` (runs past the limit are skipped) over one key."""
    key: Expr
    limit: int
    per_ms: int
    burst: int = 1


class FairnessIR(IR):
    """`fairness`: admissions shared between the values of `key` in proportion to `weight` (CEL; None: 1)."""
    key: Expr
    weight: Expr | None = None


class FlowIR(_Optional):
    """The flow limits of a workflow (§22, docs/flow.md), computed per run before its admission."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ("concurrency", "throttle", "rate_limit", "priority", "fairness")
    concurrency: tuple[KeyLimitIR, ...] = ()
    throttle: WindowIR | None = None
    rate_limit: WindowIR | None = None
    priority: Expr | int | None = None        # 1..9, or CEL giving one
    fairness: FairnessIR | None = None


class BufferIR(IR):
    """A workflow's debounce or batch (§22, runtime/buffers): how its events are buffered instead of each starting
    a run. Debounce: due `quiet_ms` after the latest event, at the latest `max_wait_ms` after the first; batch:
    due `max_wait_ms` after the first, at once when `max_size` events or `max_bytes` are reached."""
    kind: Literal["debounce", "batch"]
    key: Expr | None = None
    quiet_ms: int | None = None
    max_wait_ms: int
    deliver: Literal["last", "first", "all"] = "all"
    max_size: int
    max_bytes: int


class MigrateIR(_Optional):
    """A workflow's `migrate:` block (§23, docs/deploys.md): runs of versions `from` may move to this one; `rename`
    maps old step ids to new ones, `removed` names old steps that are gone (`skip`), `added_before_frontier` says
    what a new step before where a run stands does (`skip` | `run`; None: such a run is blocked), `outputs` gives
    a completed step's output in this version (CEL over `output`, its old output)."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ("added_before_frontier",)
    from_versions: tuple[int, ...]
    rename: dict[str, str] = {}
    removed: dict[str, str] = {}
    added_before_frontier: Literal["skip", "run"] | None = None
    outputs: dict[str, Expr] = {}


class WorkflowIR(_Optional):
    OPTIONAL: ClassVar[tuple[str, ...]] = ("expect", "flow", "buffer", "versioning", "migrate")
    ir_version: int = IR_VERSION
    kind: Literal["workflow", "code"] = "workflow"     # code: a Python workflow (§12), see `code` and sdk/
    workflow_id: str
    name: str
    version: int
    sha256: str = ""
    queue: str
    concurrency: ConcurrencyIR
    deadline_ms: int
    lease_ms: int
    triggers: tuple[TriggerIR, ...]
    nodes: tuple[NodeIR, ...]
    edges: tuple[tuple[str, str], ...]
    source: dict[str, Any] | None = None
    expect: tuple[Expr, ...] = ()             # checked over the run's rows and result when every step is done
    flow: FlowIR | None = None                # per-key limits (§22); None: only queue and workflow caps
    buffer: BufferIR | None = None            # debounce or batch: events join a buffer, its flush starts the run
    versioning: Literal["auto-upgrade"] | None = None   # None: `pin` (§23): runs stay on their version
    migrate: MigrateIR | None = None          # how runs of older versions map onto this one (§23)

    def node(self, step_id: str) -> NodeIR:
        for n in self.nodes:
            if n.id == step_id:
                return n
        raise KeyError(step_id)


class CodeWorkflowIR(WorkflowIR):
    """A workflow written in Python (§12): no nodes; `code` says where the function is and hashes its source."""
    kind: Literal["code"] = "code"
    code: dict[str, Any]          # {module (file path), qualname, source_sha256}


def canonical_json(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def seal(ir: WorkflowIR) -> WorkflowIR:
    """Fill in `sha256` from the canonical JSON of everything but `sha256` and `source`."""
    body = ir.model_dump(mode="json", exclude={"sha256", "source"})
    digest = hashlib.sha256(canonical_json(body).encode()).hexdigest()
    return ir.model_copy(update={"sha256": digest})


def to_json(ir: IR) -> dict[str, Any]:
    return ir.model_dump(mode="json")


def load_workflow_ir(doc: dict[str, Any]) -> WorkflowIR:
    """Rebuild a WorkflowIR from stored JSON; refuses IR of another ir_version."""
    if doc.get("ir_version") != IR_VERSION:
        raise ValueError(f"IR version {doc.get('ir_version')!r} is not supported (expected {IR_VERSION})")
    return (CodeWorkflowIR if doc.get("kind") == "code" else WorkflowIR).model_validate(doc)
