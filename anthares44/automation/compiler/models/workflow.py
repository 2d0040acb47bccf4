"""The workflow file (§3): name, version, triggers, concurrency and the steps.

A step's connector parameters are not fields here: they sit on the step (built-ins) or under `with:`
(plugins) and are validated by the connector's own model in `rules/connector_params.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, StrictInt, StrictStr, Tag

from .approvals import Approval
from .base import Model, OpenModel
from .deploys import Migrate, Versioning
from .flow import Fairness, KeyLimit, RateLimit, Throttle
from .flow_buffers import Batch, Debounce
from .triggers import InlineTrigger
from .types import (
    WORKFLOW_NAME_PATTERN,
    Bool,
    CalendarSpan,
    Duration,
    PositiveInt,
    RunSpan,
    StepId,
    TimeZone,
    Version,
)


class Retry(Model):
    """How a failing step is retried (§3.2). Permanent errors (other 4xx, validation) skip the remaining retries."""

    max: int = Field(3, ge=0, le=100, strict=True)
    """Retries after the first attempt (0 = no retry)."""
    strategy: Literal["exponential-jitter", "fixed", "none"] = "exponential-jitter"
    """`exponential-jitter`: delay before attempt n+1 drawn uniformly from [0, min(base*2^(n-1), cap)]."""
    base: Duration | None = None
    """First backoff bound (default 1s)."""
    cap: Duration | None = None
    """Largest backoff bound (default 300s); lower it for deadline-bound flows."""


class Concurrency(Model):
    """At most `max` runs of this workflow at once; `partitionKey` orders runs per key."""

    max: PositiveInt = 100
    """Runs of this workflow in flight at once."""
    partitionKey: StrictStr | None = None
    """Template rendered at ingestion, e.g. `{{ input.invoiceId }}`."""


class Compensation(OpenModel):
    """A step-like mapping that undoes a step (saga, §6): `uses` plus that connector's parameters."""

    uses: StrictStr
    """The connector that undoes the effect."""
    timeout: Duration | None = None
    """Time limit of one compensation attempt (default: the step's timeout)."""
    with_: dict[str, Any] | None = Field(None, alias="with")
    """Parameters of a `connector/...` plugin."""


class Rows(Model):
    """Row counts a step reports (§16): each a CEL expression over `result` (this step's result) and `input`
    giving a non-negative integer, e.g. `in: "result.body.count"`."""

    in_: StrictStr | None = Field(None, alias="in")
    """Rows the step read, e.g. `result.body.count`."""
    out: StrictStr | None = None
    """Rows the step wrote, e.g. `result.rowCount` (the default of `sql/execute`)."""
    error: StrictStr | None = None
    """Rows the step rejected."""


class PartitionRange(Model):
    """Partitions from `from` (or, with `since: lastSuccess`, from what this step has not yet processed) to `to`
    inclusive, one every `every` (e.g. one a day)."""

    from_: StrictStr | None = Field(None, alias="from")
    """CEL giving the first partition: an ISO date (`'2026-07-01'`) or date-time string, e.g. `input.from`."""
    since: Literal["lastSuccess"] | None = None
    """Instead of `from`: start at the earliest partition this step of this workflow has not processed (success or
    skipped) in any run, from `initial` on; the plan is decided once per run and recorded."""
    initial: StrictStr | None = None
    """With `since`: the first partition ever (an ISO date or date-time, not CEL), used while nothing succeeded."""
    max: Annotated[int, Field(ge=1, le=10_000)] | None = None
    """With `since`: at most this many partitions in one run's plan (default 366); more is E_PARTITIONS_INVALID."""
    to: StrictStr
    """CEL giving the last partition (inclusive), same form as `from`; e.g. `run.yesterday` (the day before the
    run's logical date)."""
    every: Duration
    """The step between partitions, e.g. `1d` or `1h`; whole days give date keys (`2026-07-04`)."""


class Partitions(Model):
    """Fan-out: the step's connector call runs once per partition, each with its own attempts, retries,
    timeout and idempotency key `{run_id}:{step_id}:{partition}`; results are collected in partition order."""

    foreach: StrictStr | None = None
    """CEL giving the list of items, e.g. `input.invoices` (at most 100,000); each item is a partition: its key is
    `key` of the item, else the item itself when a string (other values as compact JSON)."""
    key: StrictStr | None = None
    """With `foreach`: CEL over `item` giving each item's partition key, e.g. `item.id` (a non-null string or
    number, unique within the list)."""
    range: PartitionRange | None = None
    """A date range instead of a list."""
    concurrency: PositiveInt = 4
    """Partitions in flight at once."""
    onConflict: Literal["wait", "skip"] = "wait"
    """When another run of the workflow is processing the same partition of this step: `wait` until it is done
    (the run holds no worker meanwhile), or `skip` it here, recorded as skipped with the other run's id."""


class Sleep(Model):
    """A durable wait that is not a fixed duration (§19): `for` a span in local wall time, or `until` an instant."""

    for_: CalendarSpan | None = Field(None, alias="for")
    """How long: `1mo`, `2w`, `30d`, `1y`, `1d12h`; `y`, `mo`, `w`, `d` count in local wall time of `tz` (month ends
    clamped: 31 Jan + 1mo = 28/29 Feb), then `h`, `m`, `s`, `ms` as elapsed time."""
    until: StrictStr | None = None
    """Until an instant with its offset: `2026-07-01T09:00:00-03:00`, `...Z`, or a template giving one, e.g.
    `{{ input.renewsAt }}`; a past instant ends the sleep at once."""
    tz: TimeZone | None = None
    """With `for`: the IANA zone whose wall time the calendar units count in (default UTC)."""
    dstPolicy: Literal["skip-nonexistent", "run-once", "run-twice"] | None = None
    """With `for`: a wall time in a DST gap is shifted forward by the gap; in a fold it is the first instant, or
    under `run-twice` the second (default `skip-nonexistent`)."""


def _sleep_form(value: Any) -> str:
    return "Sleep" if isinstance(value, dict) else "Duration"


SleepField = Annotated[Annotated[RunSpan, Tag("Duration")] | Annotated[Sleep, Tag("Sleep")],
                       Discriminator(_sleep_form)]


def _concurrency_form(value: Any) -> str:
    return "KeyLimits" if isinstance(value, list) else "Concurrency"


# the workflow cap `{max, partitionKey}` or per-key limits (§22): one form's errors only, chosen by the shape
ConcurrencyField = Annotated[
    Annotated[Concurrency, Tag("Concurrency")] | Annotated[list[KeyLimit], Tag("KeyLimits")],
    Discriminator(_concurrency_form)]


class Correlate(Model):
    """How an event is matched to the run that waits for it: equal values of two CEL expressions (§20)."""

    run: StrictStr
    """CEL over the run (`input`, `steps`, `trigger`, `run`), e.g. `input.invoiceId`."""
    event: StrictStr
    """CEL over the event envelope (`data`, `id`, `type`, ...), e.g. `data.invoiceId`."""


class AnyBranch(Model):
    """One thing a `wait: {any: [...]}` waits for: an event (`event`, `correlate`, `if`, `since` as in an event
    wait), a signal (`signal: NAME`) or a span of time (`sleep: 3d`)."""

    signal: StrictStr | None = Field(None, pattern=r"^[a-z][a-z0-9_.-]{0,99}$")
    """A signal of this name sent to the run."""
    event: StrictStr | None = Field(None, min_length=1, max_length=200)
    """An event of this type correlated with the run by `correlate`."""
    correlate: Correlate | Literal["none"] | None = None
    """With `event`: as in an event wait (required; `none` is a broadcast)."""
    if_: StrictStr | None = Field(None, alias="if")
    """With `event`: as in an event wait."""
    since: StrictStr | None = None
    """With `event`: as in an event wait."""
    sleep: RunSpan | None = None
    """This long after the wait opened."""


class Wait(Model):
    """A durable wait for something sent to the run (§20, docs/waits.md); the run holds no worker meanwhile:
    a signal (`signal: NAME`), an event correlated with the run (`event: TYPE`, `correlate`), or the first of
    several (`any: [...]`)."""

    signal: StrictStr | None = Field(None, pattern=r"^[a-z][a-z0-9_.-]{0,99}$")
    """The name of the signal to wait for (`a44 automation signal RUN NAME`); signals sent before the wait opens
    are buffered and consumed in order, each by one wait."""
    event: StrictStr | None = Field(None, min_length=1, max_length=200)
    """The event type to wait for (`a44 automation events publish TYPE`), matched to the run by `correlate`."""
    correlate: Correlate | Literal["none"] | None = None
    """Required with `event`: `{run: CEL, event: CEL}` (the event matches when both give the same value), or
    `none` for a broadcast wait (any event of the type)."""
    if_: StrictStr | None = Field(None, alias="if")
    """With `event`: CEL over `event` (the envelope), `input`, `steps`, `trigger`; a false (or failing) candidate
    is not a match."""
    since: StrictStr | None = None
    """With `event`: which events count: `run_start` (default: ingested after the run was created), `wait_open`
    (after the wait opened), or a lookback before the run's creation, e.g. `-15m` (at most 7d)."""
    any: list[AnyBranch] | None = Field(None, min_length=1, max_length=20)
    """The first of several: `[{event: ..., correlate: ...}, {signal: cancel}, {sleep: 3d}]`; the output names
    which (`kind` and `index`)."""
    timeout: RunSpan | None = None
    """How long to wait, e.g. `7d` (required but with `any`); it must fit in the run's `maxDuration`."""
    onTimeout: Literal["fail", "continue"] = "fail"
    """When the timeout comes first: `fail` the step (E_WAIT_TIMEOUT, not retried) or `continue` with output
    `{"kind": "timeout"}`."""


class Step(OpenModel):
    """One step: a connector call (`uses`), a durable `sleep` or `wait`, an `approval`, or `uses: pass`."""

    id: StepId
    """Unique within the workflow; appears in logs, metrics and replay (`--from-step`)."""
    uses: StrictStr | None = None
    """The connector: a built-in (`http`, `vpn/http`, `sql/execute`, `storage/put`, `storage/get`, `queue/publish`,
    `bot/invoke`, `pass`), a declared connector id (`con_...`) or a plugin (`connector/payments.authorize`)."""
    timeout: RunSpan | None = None
    """Mandatory (except sleep steps): the time limit of one attempt, e.g. `15s`."""
    retry: Retry | None = None
    """Retry policy; default: no retry."""
    compensate: StrictStr | Compensation | None = None
    """Connector (or step-like mapping) that undoes this step if a later step fails for good."""
    if_: StrictStr | None = Field(None, alias="if")
    """CEL condition over `input`, `steps` (earlier steps) and `trigger`; false skips the step."""
    needs: list[StepId] | None = None
    """Steps that must finish first; turns the list into a DAG."""
    exclusive: Bool = False
    """If the run's lease expires while this step runs, wait for a person instead of re-granting (§7.3)."""
    sleep: SleepField | None = None
    """A durable wait: `sleep: 30s`, `sleep: {for: 1mo, tz: America/Sao_Paulo}` or `sleep: {until: "{{ ... }}"}`;
    takes no `uses` and no `timeout`; it must fit in the run's `maxDuration`."""
    wait: Wait | Literal["result", "started", "none"] | None = None
    """A durable wait for a signal (`wait: {signal: approved, timeout: 7d}`) or an event (`wait: {event: TYPE,
    correlate: {run: CEL, event: CEL}, timeout: 7d}`); takes no `uses` and no `timeout` (the wait has its own);
    its output is `{"kind": "signal", "signal": {"name", "data"}}` or `{"kind": "event", "event": {envelope}}`.
    On a child-workflow step (`uses: workflow/NAME`, §21): `result` (default: until the child ends), `started`
    (until it is first leased) or `none` (at once; the output is the child's run id)."""
    approval: Approval | None = None
    """A person's decision: `approval: {approvers: {groups: [finance-leads], min: 2}, timeout: 72h}`; takes no
    `uses` and no `timeout` (docs/approvals.md); its output is `{"kind": "approval", "decision", "approvers"}`."""
    with_: dict[str, Any] | None = Field(None, alias="with")
    """Parameters of a `connector/...` plugin, validated by the plugin's own model."""
    rows: Rows | None = None
    """Row counts the step reports (`in`, `out`, `error`), CEL over `result` and `input`; they add up into the
    run's summary (docs/rows.md)."""
    expect: StrictStr | list[StrictStr] | None = None
    """CEL condition(s) over `rows`, `result`, `input` and earlier `steps`, checked when the step succeeds; a false
    one fails the step with E_EXPECTATION_FAILED (not retried), e.g. `rows.in > 0`."""
    description: StrictStr | None = None
    """Free text."""
    partitions: Partitions | None = None
    """Run the call once per partition (`{{ partition }}` in templates) instead of once."""
    onPartitionFailure: Literal["partial", "fail", "compensate"] | None = None
    """When partitions fail for good: `partial` (the step succeeds with the rest and the run ends `partial`),
    `fail` (default: the step fails), `compensate` (the step fails and earlier steps are compensated)."""


class Workflow(Model):
    """A workflow: one per file."""

    kind: Literal["workflow"] | None = None
    """Optional; the file kind is recognised by shape."""
    name: str = Field(pattern=WORKFLOW_NAME_PATTERN)
    """Lowercase name; the workflow id is `wf_` + name with `-` turned into `_`."""
    version: Version
    """Mandatory positive integer; increment it whenever the steps change."""
    description: StrictStr | None = None
    """Free text."""
    trigger: InlineTrigger | None = None
    """Inline trigger shorthand, e.g. `trigger: {event: billing.invoice.finalized}`."""
    triggers: list[InlineTrigger] | None = None
    """Several inline triggers."""
    queue: StrictStr | None = None
    """Queue id (`q_...`); default: the project's default queue (concurrency 100, ordering none)."""
    concurrency: ConcurrencyField | None = None
    """Workflow-level concurrency limit and partition key, or per-key limits (§22, docs/flow.md)."""
    throttle: Throttle | None = None
    """Starts per key and time window: the rest wait (§22)."""
    rateLimit: RateLimit | None = None
    """Runs per key and time window: the rest are skipped (§22)."""
    priority: StrictStr | StrictInt | None = None
    """1 (first) .. 9 (default 5), or CEL over `input` giving one; a waiting run gains a level every 30 s, so
    none waits forever behind higher levels (§22)."""
    fairness: Fairness | None = None
    """Weighted fair share of admissions between key values (§22)."""
    debounce: Debounce | None = None
    """Collapse bursts of events per key into one run (§22): `{key, quiet, maxWait, deliver: last|first|all}`."""
    batch: Batch | None = None
    """Gather events per key into runs of up to `maxSize` events (§22): `{key, maxSize, maxWait, maxBytes}`."""
    timeout: RunSpan | None = None
    """Deadline of a whole run (default and maximum: `maxDuration`)."""
    maxDuration: RunSpan | None = None
    """How long a run may last, sleeps included (default 72h, at most 400d); a sleep or timeout that cannot fit
    is refused at publish."""
    steps: list[Step] = Field(min_length=1)
    """The steps, run in the order written unless `needs` says otherwise."""
    expect: StrictStr | list[StrictStr] | None = None
    """CEL condition(s) over the run's `rows` totals, `result` (the sink steps' outputs), `input` and `steps`,
    checked when every step is done; a false one fails the run with E_EXPECTATION_FAILED."""
    versioning: Versioning | None = None
    """`pin` (default): a run stays on the version it started on; `auto-upgrade`: open runs the deploy plan marks
    compatible move to this version at their next step (audited, docs/deploys.md)."""
    migrate: Migrate | None = None
    """How runs of older versions map onto this one: `{from: [3], rename: {old: new}, removed: {step: skip},
    addedBeforeFrontier: skip|run, outputs: {step: CEL}}` (`runs migrate`, docs/deploys.md)."""
