"""Lowering: validated models -> IR with every default resolved, expressions compiled, templates marked.

Only files without errors are lowered; the compiler never emits IR for a definition it reported as wrong.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from ..calendar import DEFAULT_DST_POLICY
from ..diagnostics import Severity
from .graph import edges
from .ir import (
    DEFAULT_CONCURRENCY,
    DEFAULT_LEASE_MS,
    DEFAULT_QUEUE,
    DEFAULT_RETRY_BASE_MS,
    DEFAULT_RETRY_CAP_MS,
    DEFAULT_SINCE_MAX,
    RUN_DEADLINE_MS,
    ApprovalIR,
    BufferIR,
    CatchUpIR,
    ChildIR,
    CompensationIR,
    ConcurrencyIR,
    ConnectorRef,
    DeliverIR,
    Expr,
    FairnessIR,
    FlowIR,
    KeyLimitIR,
    MigrateIR,
    NodeIR,
    PartitionsIR,
    RetryIR,
    SleepIR,
    TriggerIR,
    WaitBranchIR,
    WaitIR,
    WindowIR,
    WorkflowIR,
    seal,
)
from .models.workflow import AnyBranch, Sleep, Wait
from .project import workflow_id
from .resolve import resolve
from .rules.expectations import ROW_FIELDS, ROWS_ROOTS, STEP_EXPECT_ROOTS, WORKFLOW_EXPECT_ROOTS, expect_list, step_rows
from .rules.timers import run_deadline_ms
from .templating import is_template

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..diagnostics import Diagnostic
    from .documents import Decl
    from .models import Workflow
    from .models.flow import RateLimit, Throttle
    from .models.workflow import Compensation, PartitionRange, Step
    from .project import Project

TriggerType = Literal["event", "webhook", "schedule", "manual"]


def mark_templates(value: Any) -> Any:
    """Wrap template strings as {"$tpl": text}; everything else is copied as plain JSON."""
    if isinstance(value, str):
        return {"$tpl": value} if is_template(value) else value
    if isinstance(value, dict):
        return {k: mark_templates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mark_templates(v) for v in value]
    return value


@overload
def _expr(text: str, roots: set[str], fields: dict[str, Any] | None = None) -> Expr: ...
@overload
def _expr(text: str | None, roots: set[str], fields: dict[str, Any] | None = None) -> Expr | None: ...
def _expr(text: str | None, roots: set[str], fields: dict[str, Any] | None = None) -> Expr | None:
    if text is None:
        return None
    from ..grammar import compile_expression

    res = compile_expression(text, roots=roots, fields=fields)
    if res.program is None:
        raise ValueError(f"expression {text!r} does not compile")  # unreachable after rules passed
    return Expr(cel=text, program=res.program.to_ir())


def _connector(uses: str, project: Project) -> ConnectorRef:
    res = resolve(uses, project)
    kind = cast(Literal["builtin", "declared", "plugin"], res.kind) if res.settled else "unresolved"
    model = project.connector_model(uses) if kind == "declared" else None
    # the interpreter reads only IR: a declared connector's settings travel inside the workflow's IR, so a
    # published version keeps the configuration it was tested with (secrets stay references)
    config = model.model_dump(mode="json", by_alias=True, exclude_none=True) if model is not None else None
    return ConnectorRef(uses=uses, kind=kind, type=res.type, config=config)


def _params(step_model: Step | Compensation) -> dict[str, Any]:
    """Connector parameters as written: extra keys of a built-in/declared step, or `with:` of a plugin."""
    extra = dict(step_model.model_extra or {})
    if step_model.with_ is not None:
        extra = dict(step_model.with_)
    marked: dict[str, Any] = mark_templates(extra)
    return marked


def _partitions(step: Step, roots: set[str]) -> PartitionsIR | None:
    p = step.partitions
    if p is None:
        return None
    r = p.range
    from .rules.expressions import ITEM_KEY_ROOTS, RANGE_ROOTS

    key = _expr(p.key, ITEM_KEY_ROOTS) if p.key is not None and p.foreach is not None else None
    return PartitionsIR(foreach=_expr(p.foreach, roots), range_from=_expr(r.from_, RANGE_ROOTS) if r else None,
                        range_to=_expr(r.to, RANGE_ROOTS) if r else None, every_ms=r.every if r else None,
                        concurrency=p.concurrency, on_failure=step.onPartitionFailure or "fail",
                        on_conflict="skip" if p.onConflict == "skip" else None, key=key, **_since(r))


def _since(r: PartitionRange | None) -> dict[str, Any]:
    if r is None or r.since is None:
        return {}
    return {"since": "last_success", "initial": r.initial, "max": r.max or DEFAULT_SINCE_MAX}


def _child(step: Step, project: Project) -> ChildIR | None:
    """A `uses: workflow/NAME` step (§21): the child's version pinned now (the one in these files, else the
    latest published), its input marked for rendering when the step starts."""
    if step.uses is None or not step.uses.startswith("workflow/"):
        return None
    extra = dict(step.model_extra or {})

    def pinned(uses: str) -> tuple[str, int]:
        wid = workflow_id(uses[len("workflow/"):])
        decl = project.workflows.get(wid)
        return wid, decl.model.version if decl is not None else project.known.versions.get(wid, 0)

    wid, version = pinned(step.uses)
    comp = pinned(step.compensate) if isinstance(step.compensate, str) else None
    return ChildIR(workflow_id=wid, version=version, input=mark_templates(extra.get("input") or {}),
                   wait=step.wait if isinstance(step.wait, str) else "result", timeout_ms=step.timeout or 0,
                   on_timeout="keep" if extra.get("childOnTimeout") == "keep" else "cancel",
                   on_parent_cancel="abandon" if extra.get("onParentCancel") == "abandon" else "cancel",
                   compensate_workflow_id=comp[0] if comp else None, compensate_version=comp[1] if comp else None)


def lower_step(i: int, step: Step, project: Project, wf_deadline_ms: int = RUN_DEADLINE_MS) -> NodeIR:
    r = step.retry
    retry = RetryIR(max=r.max if r else 0, strategy=r.strategy if r else "none",
                    base_ms=(r.base if r and r.base is not None else DEFAULT_RETRY_BASE_MS),
                    cap_ms=(r.cap if r and r.cap is not None else DEFAULT_RETRY_CAP_MS))
    child = _child(step, project)
    comp = None
    if child is not None:
        comp = None if step.compensate is None else CompensationIR(
            connector=ConnectorRef(uses=str(step.compensate), kind="builtin", type="workflow"),
            timeout_ms=step.timeout or 0, params={})
    elif isinstance(step.compensate, str):
        comp = CompensationIR(connector=_connector(step.compensate, project), timeout_ms=step.timeout or 0,
                              params={})
    elif step.compensate is not None:
        c = step.compensate
        comp = CompensationIR(connector=_connector(c.uses, project), timeout_ms=c.timeout or step.timeout or 0,
                              params=_params(c))
    from .rules.expressions import IF_ROOTS

    sleep_ms, sleep = _sleep(step.sleep)
    w = step.wait if isinstance(step.wait, Wait) else None
    wait = None if w is None else _wait(w, wf_deadline_ms)
    approval = _approval(step)
    kind: Literal["call", "sleep", "wait", "child", "approval"] = \
        "sleep" if step.sleep is not None else "wait" if w else "child" if child else \
        "approval" if approval else "call"
    return NodeIR(id=step.id, index=i, kind=kind,
                  connector=_connector(step.uses, project) if step.uses and not child else None,
                  timeout_ms=step.timeout, retry=retry, compensate=comp, condition=_expr(step.if_, IF_ROOTS),
                  exclusive=step.exclusive, sleep_ms=sleep_ms, params={} if child else _params(step),
                  rows=_rows(step), expect=_expects(step.expect, STEP_EXPECT_ROOTS),
                  partitions=_partitions(step, IF_ROOTS), sleep=sleep, wait=wait, child=child,
                  approval=approval)


def _approval(step: Step) -> ApprovalIR | None:
    a = step.approval
    if a is None:
        return None
    e = a.escalate
    return ApprovalIR(groups=tuple(a.approvers.groups), min=a.approvers.min, timeout_ms=a.timeout,
                      remind_ms=tuple(sorted(set(a.remind or ()))), escalate_after_ms=e.after if e else None,
                      escalate_groups=tuple(e.to.groups) if e else (), on_timeout=a.onTimeout, notify=a.notify,
                      allow_self=a.allowSelf)


def _wait(w: Wait, deadline_ms: int) -> WaitIR:
    """A signal wait as it always was; an event wait with its CEL compiled (rules/waits.py checked it); `any`
    with its branches, until the run's wall-clock limit when it has no timeout."""
    timeout_ms = w.timeout if w.timeout is not None else deadline_ms
    if w.any is not None:
        return WaitIR(kind="any", branches=tuple(_branch(b) for b in w.any), timeout_ms=timeout_ms,
                      on_timeout=w.onTimeout)
    if w.event is None:
        return WaitIR(kind="signal", signal=w.signal, timeout_ms=timeout_ms, on_timeout=w.onTimeout)
    return WaitIR(kind="event", **_event_fields(w), timeout_ms=timeout_ms, on_timeout=w.onTimeout)


def _event_fields(w: Wait | AnyBranch) -> dict[str, Any]:
    from .rules.expressions import FILTER_ROOTS, IF_ROOTS
    from .rules.waits import EVENT_IF_ROOTS, since_of

    c = w.correlate if not isinstance(w.correlate, str) else None
    since, lookback_ms = since_of(w.since)
    return dict(event=w.event, correlate_run=_expr(c.run, IF_ROOTS) if c else None,
                correlate_event=_expr(c.event, FILTER_ROOTS) if c else None,
                condition=_expr(w.if_, EVENT_IF_ROOTS), since=since, lookback_ms=lookback_ms)


def _branch(b: AnyBranch) -> WaitBranchIR:
    if b.event is not None:
        return WaitBranchIR(kind="event", **_event_fields(b))
    if b.signal is not None:
        return WaitBranchIR(kind="signal", signal=b.signal)
    return WaitBranchIR(kind="sleep", sleep_ms=b.sleep)


def _sleep(value: int | Sleep | None) -> tuple[int | None, SleepIR | None]:
    """(sleep_ms, SleepIR): a span that is the same length in every zone (no months; days only in UTC) stays a
    plain `sleep_ms`, as `sleep: 30s` always was; the rest needs the calendar when the sleep opens."""
    if not isinstance(value, Sleep):
        return value, None
    if value.until is not None:
        static = not is_template(value.until)
        return None, SleepIR(kind="until", until=_instant(value.until) if static else mark_templates(value.until))
    from ..calendar import parse_span

    span, tz = parse_span(value.for_ or ""), value.tz or "UTC"
    if span.months == 0 and (span.days == 0 or tz == "UTC"):
        return span.days * 86_400_000 + span.ms, None
    return None, SleepIR(kind="for", months=span.months, days=span.days, ms=span.ms, tz=tz,
                         dst_policy=value.dstPolicy or DEFAULT_DST_POLICY)


def _instant(text: str) -> str:
    from ..calendar import parse_instant

    return parse_instant(text).isoformat()


def _rows(step: Step) -> dict[str, Expr] | None:
    """The step's `rows:` as written (a connector's default rows are the runtime's: rules/expectations.py)."""
    declared = step_rows(step, defaults=False)
    if not declared:
        return None
    return {k: _expr(text, ROWS_ROOTS) for k, text in declared.items()}


def _expects(value: str | list[str] | None, roots: set[str]) -> tuple[Expr, ...]:
    return tuple(_expr(text, roots, ROW_FIELDS) for text in expect_list(value))


def lower_trigger(t: BaseModel, wf_id: str, trig_id: str, type_: TriggerType) -> TriggerIR:
    from .rules.expressions import FILTER_ROOTS

    deliver = getattr(t, "deliver", None)
    catch = getattr(t, "catchUp", None)
    return TriggerIR(
        id=trig_id, type=type_, workflow_id=wf_id, event=getattr(t, "event", None),
        filter=_expr(getattr(t, "filter", None), FILTER_ROOTS),
        deliver=DeliverIR(max_age_ms=deliver.maxAge if deliver else None,
                          drop_on_filter_miss=deliver.dropOnFilterMiss if deliver else True)
        if type_ == "event" else None,
        partition_key=mark_templates(getattr(t, "partitionKey", None)),
        cron=getattr(t, "cron", None), tz=getattr(t, "tz", None),
        dst_policy=(getattr(t, "dstPolicy", None) or "skip-nonexistent") if type_ == "schedule" else None,
        overlap=(getattr(t, "overlap", None) or "skip") if type_ == "schedule" else None,
        catch_up=CatchUpIR(enabled=catch.enabled, max_occurrences=catch.maxOccurrences, max_age_ms=catch.maxAge)
        if catch else None,
        input=getattr(t, "input", None))


def lower_workflow(decl: Decl[Workflow], project: Project) -> WorkflowIR:
    wf = decl.model
    wid = workflow_id(wf.name)
    inline = ([wf.trigger] if wf.trigger else []) + list(wf.triggers or ())
    triggers = []
    for n, t in enumerate(inline):
        type_: TriggerType = "event" if t.event else "schedule" if t.cron else "webhook" if t.webhook else "manual"
        triggers.append(lower_trigger(t, wid, t.id or f"trg_{wid[3:]}_{n + 1}", type_))
    conc = wf.concurrency if not isinstance(wf.concurrency, list) else None
    ir = WorkflowIR(
        workflow_id=wid, name=wf.name, version=wf.version, queue=wf.queue or DEFAULT_QUEUE,
        concurrency=ConcurrencyIR(max=conc.max if conc else DEFAULT_CONCURRENCY,
                                  partition_key=mark_templates(conc.partitionKey) if conc else None),
        deadline_ms=run_deadline_ms(wf), lease_ms=DEFAULT_LEASE_MS,
        triggers=tuple(triggers), nodes=tuple(lower_step(i, s, project, run_deadline_ms(wf)) for i, s in enumerate(wf.steps)),
        edges=tuple(edges(wf)), source={"file": decl.src.path, "format": "yaml"},
        expect=_expects(wf.expect, WORKFLOW_EXPECT_ROOTS), flow=_flow(wf),
        buffer=lower_buffer(wf), versioning="auto-upgrade" if wf.versioning == "auto-upgrade" else None,
        migrate=_migrate(wf))
    return seal(ir)


OUTPUT_ROOTS = {"output", "input"}      # a `migrate: outputs:` expression: the completed step's old output


def _migrate(wf: Workflow) -> MigrateIR | None:
    m = wf.migrate
    if m is None:
        return None
    return MigrateIR(from_versions=tuple(sorted(set(m.from_))), rename=dict(m.rename or {}),
                     removed=dict(m.removed or {}),
                     added_before_frontier=m.addedBeforeFrontier,  # type: ignore[arg-type]  # checked by rules
                     outputs={k: _expr(v, OUTPUT_ROOTS) for k, v in sorted((m.outputs or {}).items())})


def _flow(wf: Workflow) -> FlowIR | None:
    from .rules.flow_limits import KEY_ROOTS

    limits = wf.concurrency if isinstance(wf.concurrency, list) else []
    conc = tuple(KeyLimitIR(key=_expr(c.key, KEY_ROOTS), limit=c.limit, scope=c.scope,  # type: ignore[arg-type]
                            hold=c.holdWhileWaiting) for c in limits)

    def window(w: Throttle | RateLimit | None, burst: int | None) -> WindowIR | None:
        return None if w is None else WindowIR(key=_expr(w.key, KEY_ROOTS), limit=w.limit, per_ms=w.per,
                                               burst=burst or 1)

    prio = wf.priority if not isinstance(wf.priority, str) else _expr(wf.priority, KEY_ROOTS)
    fair = None if wf.fairness is None else FairnessIR(key=_expr(wf.fairness.key, KEY_ROOTS),
                                                       weight=_expr(wf.fairness.weight, KEY_ROOTS))
    flow = FlowIR(concurrency=conc, throttle=window(wf.throttle, wf.throttle.burst if wf.throttle else None),
                  rate_limit=window(wf.rateLimit, None), priority=prio, fairness=fair)
    return flow if (flow.concurrency or flow.throttle or flow.rate_limit or flow.priority is not None
                    or flow.fairness) else None


def lower_buffer(wf: Workflow) -> BufferIR | None:
    """The workflow's debounce or batch (rules/flow_buffers.py refuses both at once); a debounce holds at most
    MAX_BATCH_SIZE events and MAX_BYTES, so even an endless burst starts runs."""
    from .models import flow_buffers as fb
    from .rules.flow_buffers import KEY_ROOTS

    if wf.debounce is not None:
        d = wf.debounce
        return BufferIR(kind="debounce", key=_expr(d.key, KEY_ROOTS), quiet_ms=d.quiet,
                        max_wait_ms=d.maxWait if d.maxWait is not None else max(d.quiet, fb.DEFAULT_DEBOUNCE_WAIT_MS),
                        deliver=d.deliver, max_size=fb.MAX_BATCH_SIZE, max_bytes=fb.MAX_BYTES)
    if wf.batch is not None:
        b = wf.batch
        return BufferIR(kind="batch", key=_expr(b.key, KEY_ROOTS), deliver="all", max_size=b.maxSize,
                        max_wait_ms=b.maxWait if b.maxWait is not None else fb.DEFAULT_BATCH_WAIT_MS,
                        max_bytes=b.maxBytes if b.maxBytes is not None else fb.DEFAULT_BATCH_BYTES)
    return None


def lower_project(project: Project, diagnostics: Iterable[Diagnostic]) -> dict[str, Any]:
    """IR of every workflow and standalone trigger whose file has no error."""
    bad_files = {d.file for d in diagnostics if d.severity is Severity.ERROR}
    out: dict[str, Any] = {}
    for decl in project.of_kind("workflow"):
        if decl.src.path not in bad_files and not decl.salvaged:
            out[workflow_id(decl.model.name)] = lower_workflow(decl, project)
    for decl in project.of_kind("trigger"):
        if decl.src.path not in bad_files and not decl.salvaged:
            t = decl.model
            out[t.id] = lower_trigger(t, t.workflow, t.id, t.type)
    return out
