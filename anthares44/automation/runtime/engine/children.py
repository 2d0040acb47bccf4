"""The child-workflow step (§21, docs/children.md): of a YAML workflow, a step kind (visit.py `StepKind`, node
kind `child`) that starts one run of another published workflow and, unless `wait: none`, waits for it holding no
worker, lease or slot; `create`, `look` and `outcome` are shared with a code workflow's `step.workflow(...)`
(code_visit.py).

The child is created by the commit that records the step's attempt (`Batch.child_start`, migration 0037's
`engine_op_child_start`): a crash before that commit leaves neither, one after it leaves both, and the link's
unique key (parent, epoch, step) refuses a second child whatever retries or re-grants follow. Its input is
rendered and checked first (E_CHILD_INPUT_INVALID: no child is created), its depth and its tree's size
bounded (E_CHILD_LIMIT). The
wait is a `run_waits` row of kind `child` opened in that same commit; the child's end closes it with its outcome
and makes the parent due in the transaction that ends the child (trigger `runs_children_deliver`), so the parent
never polls. At the step's `timeout` the parent closes the wait `timed_out` (one conditional update: whichever of
the child's end and the timeout commits first is the outcome), cancels the child unless `childOnTimeout: keep`,
and fails with E_CHILD_TIMEOUT. A child that ends other than succeeded (or partial) fails the step for good with
E_CHILD_FAILED. `compensate: workflow/NAME` starts that workflow once, with the child's output as its input, when
the parent's saga undoes the step (`compensation`).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from ...attempts import Attempt
from ...compiler.ir import ChildIR
from ...errors import E_CHILD_FAILED, E_CHILD_INPUT_INVALID, E_CHILD_LIMIT, E_CHILD_TIMEOUT, E_RUN_CANCELLED, A44Error
from ..render import render_params
from ..store.results import encode_json
from ..ulid import new_run_id
from .dag_steps import Steps
from .progress import Progress, StepProgress
from .states import WAITING
from .visit import Visit

MAX_DEPTH = 8                   # a root run's children are depth 1 (§21: publish refuses deeper call graphs)
MAX_TREE_RUNS = 10_000          # child runs of one tree (a runaway fan-out of children stops here: E_CHILD_LIMIT)
MAX_INPUT_BYTES = 256 * 1024    # a child's input is a run input: the same limit as a step's inline result
RENDER_BUDGET_S = 1.0
OPEN, SATISFIED, TIMED_OUT = "open", "satisfied", "timed_out"
AFTER_CHILD_COMMIT = "fault.after_child_commit"     # a service key only tests set: (run_id, step_id) -> may raise
SUCCESS = ("succeeded", "partial")
ENDED_BADLY = ("failed", "compensation_failed", "cancelled")    # `wait: started` on a child that never ran


def child_output(row_output: dict) -> dict:
    """The step's output from its wait's outcome: the child's run id, workflow, version, state and result."""
    return {k: row_output.get(k) for k in ("kind", "run_id", "workflow_id", "version", "state", "output")
            if k in row_output}


def _fault(v: Visit, step_id: str) -> None:
    fault = v.services.get(AFTER_CHILD_COMMIT)      # the tests' kill point; absent in production
    if fault is not None:
        fault(v.lease.run_id, step_id)       # may raise: the visit dies as a killed worker's would


def check_input(step_id: str, value: Any) -> dict:
    """The rendered input as a child's input: a JSON object of at most MAX_INPUT_BYTES (E_CHILD_INPUT_INVALID)."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise A44Error(E_CHILD_INPUT_INVALID, f"step {step_id}: the child's input is a {type(value).__name__}, "
                                              "not an object", step_id=step_id)
    try:
        size = len(encode_json(value).encode())
    except A44Error as err:
        raise A44Error(E_CHILD_INPUT_INVALID, f"step {step_id}: the child's input is not JSON: {err.message}",
                       step_id=step_id) from None
    if size > MAX_INPUT_BYTES:
        raise A44Error(E_CHILD_INPUT_INVALID, f"step {step_id}: the child's input is {size} bytes; at most "
                                              f"{MAX_INPUT_BYTES}", step_id=step_id)
    return value


async def create(v: Visit, step_id: str, c: ChildIR, input: dict, a: Attempt, now: datetime) -> str:
    """Check what the child needs (depth, its pinned version, its partition key) and append its creation to the
    batch of attempt `a` (started in it); the child's run id. A44Error when it cannot be created."""
    L = v.lease
    lineage = await v.store.fetchrow("child_lineage", run_id=L.run_id)
    depth = (lineage["depth"] if lineage is not None else 0) + 1
    if depth > MAX_DEPTH:
        raise A44Error(E_CHILD_LIMIT, f"step {step_id} would start a child at depth {depth}; at most {MAX_DEPTH}",
                       step_id=step_id, details={"depth": depth})
    root = lineage["root_run_id"] if lineage is not None else L.run_id
    size = await v.store.fetchval("children_of_root_count", root_run_id=root, most=MAX_TREE_RUNS)
    if size >= MAX_TREE_RUNS:
        raise A44Error(E_CHILD_LIMIT, f"step {step_id}: the tree of root run {root} has {size} child runs; at "
                                      f"most {MAX_TREE_RUNS}", step_id=step_id, details={"tree_runs": size})
    version = await v.store.fetchrow("version_get", project=L.project_id, workflow_id=c.workflow_id,
                                     version=c.version)
    if version is None:
        raise A44Error(E_CHILD_LIMIT, f"step {step_id}: workflow {c.workflow_id} version {c.version} is not "
                                      "published", step_id=step_id, hint="publish the child workflow with its parent")
    ir = version["ir"]
    from ..ingestion.runs import workflow_partition_key

    try:
        key = await workflow_partition_key(ir, input, {"id": "child", "type": "child"})
    except A44Error as err:
        raise A44Error(E_CHILD_INPUT_INVALID, f"step {step_id}: {err.message}", step_id=step_id) from None
    child_id = new_run_id(now)
    v.batch.child_start(a, child_id, c.workflow_id, c.version, input, key, ir.get("queue"), c.wait,
                        c.on_parent_cancel, now + timedelta(milliseconds=c.timeout_ms), now,
                        traceparent=parent_traceparent(v))
    return child_id


def parent_traceparent(v: Visit) -> str:
    """The W3C traceparent a child run starts from: the parent's trace (its incoming one, else its own run
    trace) with the parent's run span as the child's parent, so the child's spans sit in the parent's trace."""
    from ... import tracing as t

    spans = v.batch.spans
    parent = spans.parent if spans is not None else None
    trace_id = parent.trace_id if parent is not None else t.run_trace_id(v.lease.run_id)
    return t.format_traceparent(trace_id, t.run_span_id(v.lease.run_id))


async def look(v: Visit, step_id: str, c: ChildIR, now: datetime) -> Any:
    """The parent's wait on its child: None while it is not committed yet, the row while open before its
    timeout; at or after it, timed out (unless the child closed it first) and the child cancelled unless `keep`."""
    L = v.lease
    row = await v.store.fetchrow("child_wait", run_id=L.run_id, epoch=L.epoch, step_id=step_id)
    if row is None:
        return None
    if row["state"] == OPEN and now >= row["timeout_at"]:
        await v.store.fetchrow("wait_timeout", run_id=L.run_id, epoch=L.epoch, step_id=step_id, now=now)
        row = await v.store.fetchrow("child_wait", run_id=L.run_id, epoch=L.epoch, step_id=step_id)
        assert row is not None
    if row["state"] == TIMED_OUT and c.on_timeout == "cancel":
        # before the parent's commit and repeated by any later look until it commits (the cancel of a finished
        # run is a no-op): the child never outlives a timed-out wait it was not told to survive
        await v.store.fetchrow("run_cancel", run_id=row["key"], project=L.project_id, by=f"run:{L.run_id}",
                               reason="timeout", compensate=False,
                               message=f"the step {step_id} of parent run {L.run_id} timed out", now=now)
    return row


def outcome(step_id: str, c: ChildIR, row: Any) -> tuple[Any, A44Error | None]:
    """(output, None) or (None, error) of a closed wait on a child."""
    out = row["output"] or {}
    state = row["state"]
    if state == SATISFIED and (out.get("state") in SUCCESS or (c.wait == "started" and out.get("state") not in
                                                               ENDED_BADLY)):
        return child_output(out), None
    if state == SATISFIED:
        return None, A44Error(
            E_CHILD_FAILED, f"step {step_id}: child run {out.get('run_id')} of {c.workflow_id} ended "
                            f"{out.get('state')} ({out.get('error_code')}: {out.get('error_message')})",
            step_id=step_id, details={"child_run_id": out.get("run_id"), "child_state": out.get("state"),
                                      "child_error_code": out.get("error_code")})
    if state == TIMED_OUT:
        return None, A44Error(
            E_CHILD_TIMEOUT, f"step {step_id}: child run {row['key']} of {c.workflow_id} did not end within "
                             f"{c.timeout_ms} ms" + (" (it was cancelled)" if c.on_timeout == "cancel" else
                                                     " (it runs on: childOnTimeout keep)"),
            step_id=step_id, details={"child_run_id": row["key"]})
    # closed by the parent's own end (a cancel, the deadline)
    return None, A44Error(E_RUN_CANCELLED, f"the wait of step {step_id} for its child was closed: its run is "
                                           "ending", step_id=step_id)


class Child:
    """`StepKind` of node kind `child`."""

    async def advance(self, v: Visit, p: Progress, sp: StepProgress, now: datetime,
                      dues: list[tuple[datetime, str]]) -> bool:
        c, sid = sp.node.child, sp.node.id
        assert c is not None
        a = sp.last if sp.state == "running" else None
        if a is None:
            existing = await v.store.fetchrow("child_of_step", run_id=v.lease.run_id, epoch=v.lease.epoch,
                                              step_id=sid, kind="action")
            a = v.batch.start(sid, sp.next_attempt, "action", now)
            p.add(a)
            if existing is None:
                try:
                    child_id = await create(v, sid, c, self._input(v, p, sp, c), a, now)
                except A44Error as err:     # nothing was created: the step fails for good
                    v.batch.finish(a, "failed", now, error=err)
                    p.finished(a)
                    return True
                v.event("child.started", step=sid, child=child_id)
                if c.wait == "none":
                    v.batch.finish(a, "succeeded", now, result={"kind": "child", "run_id": child_id,
                                                                "workflow_id": c.workflow_id, "version": c.version})
                    p.finished(a)
                    return True
                # committed now, before anything else this visit does: the child exists exactly when the attempt
                # that created it is recorded, and a crash from here on finds both
                await v.batch.commit(now)
                _fault(v, sid)
                dues.append((now + timedelta(milliseconds=c.timeout_ms), WAITING))
                return False
        row = await look(v, sid, c, now)
        if row is None:     # started in this visit's batch, not committed yet: look again after the release
            dues.append((a.started_at + timedelta(milliseconds=c.timeout_ms), WAITING))
            return False
        if row["state"] == OPEN:
            _fault(v, sid)
            dues.append((row["timeout_at"], WAITING))
            return False
        v.batch.wait_resumed(sid, now)
        output, error = outcome(sid, c, row)
        if error is None:
            v.batch.finish(a, "succeeded", now, result=output)
        else:
            v.batch.finish(a, "failed", now, error=error)
        v.event("child.ended", step=sid, child=row["key"], outcome=row["state"], code=error and error.code)
        p.finished(a)
        return True

    def _input(self, v: Visit, p: Progress, sp: StepProgress, c: ChildIR) -> dict:
        scope = Steps(v, p).render_scope(sp.node.id, sp.next_attempt)
        try:
            value = render_params(c.input, scope, deadline=time.monotonic() + RENDER_BUDGET_S)
        except A44Error as err:
            raise A44Error(E_CHILD_INPUT_INVALID, f"step {sp.node.id}: the child's input could not be rendered: "
                                                  f"{err.message}", step_id=sp.node.id) from None
        return check_input(sp.node.id, value)


async def code_child(v: Visit, step_id: str, spec: dict) -> ChildIR:
    """The ChildIR of a code workflow's `step.workflow(...)`: the version is the one recorded on its link once
    created, else the latest published (code workflows pin when the step starts; E_CHILD_LIMIT when none is)."""
    L = v.lease
    link = await v.store.fetchrow("child_of_step", run_id=L.run_id, epoch=L.epoch, step_id=step_id, kind="action")
    version = None
    if link is not None:
        row = await v.store.fetchrow("run_get", run_id=link["child_run_id"], project=L.project_id)
        version = row["version"] if row is not None else None
    if version is None:
        latest = await v.store.fetchrow("version_latest", project=L.project_id, workflow_id=spec["workflow_id"])
        if latest is None:
            from ...sdk.core import StepFailed

            raise StepFailed(step_id, E_CHILD_LIMIT, f"step {step_id}: workflow {spec['workflow_id']} is not "
                                                     "published")
        version = latest["version"]
    return ChildIR(workflow_id=spec["workflow_id"], version=version, input=spec["input"], wait=spec["wait"],
                   timeout_ms=spec["timeout_ms"], on_timeout=spec["on_timeout"],
                   on_parent_cancel=spec["on_parent_cancel"])


async def compensation(v: Visit, sp: StepProgress, a: Attempt) -> tuple[Any, A44Error | None]:
    """The saga's `Undo.call` of a child step with `compensate: workflow/NAME`: that workflow is started once
    (with the child's output as its input) by the commit that finishes compensation attempt `a`; a retried or
    taken-over compensation finds the run it started and starts no other."""
    c, L = sp.node.child, v.lease
    assert c is not None and c.compensate_workflow_id is not None and c.compensate_version is not None
    existing = await v.store.fetchrow("child_of_step", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id,
                                      kind="compensation")
    if existing is not None:
        return {"kind": "child", "run_id": existing["child_run_id"]}, None
    version = await v.store.fetchrow("version_get", project=L.project_id, workflow_id=c.compensate_workflow_id,
                                     version=c.compensate_version)
    if version is None:
        return None, A44Error(E_CHILD_LIMIT, f"compensation of step {sp.node.id}: workflow "
                                             f"{c.compensate_workflow_id} version {c.compensate_version} is not "
                                             "published", step_id=sp.node.id)
    done = sp.output if isinstance(sp.output, dict) else {}
    input = done.get("output") if isinstance(done.get("output"), dict) else {}
    child_id = new_run_id(v.clock.now())
    v.batch.child_start(a, child_id, c.compensate_workflow_id, c.compensate_version, input, None,
                        version["ir"].get("queue"), "none", "abandon", v.clock.now(), v.clock.now())
    return {"kind": "child", "run_id": child_id}, None
