"""The child-workflow step of a YAML workflow (§21, node kind `child`, docs/children.md): a step kind (visit.py
`StepKind`) that starts one run of another published workflow and, unless `wait: none`, waits for it holding no
worker, lease or slot.

The child is created by the commit that records the step's attempt (`Batch.child_start`, migration 0037's
`engine_op_child_start`): a crash before that commit leaves neither, one after it leaves both, and the link's
unique key (parent, epoch, step) refuses a second child whatever retries or re-grants follow. Its input is
rendered and checked first (E_CHILD_INPUT_INVALID: no child is created), its depth bounded (E_CHILD_LIMIT). The
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
MAX_INPUT_BYTES = 256 * 1024    # a child's input is a run input: the same limit as a step's inline result
RENDER_BUDGET_S = 1.0
OPEN, SATISFIED, TIMED_OUT = "open", "satisfied", "timed_out"
AFTER_CHILD_COMMIT = "fault.after_child_commit"     # a service key only tests set: (run_id, step_id) -> may raise
SUCCESS = ("succeeded", "partial")


def child_output(row_output: dict) -> dict:
    """The step's output from its wait's outcome: the child's run id, workflow, version, state and result."""
    return {k: row_output.get(k) for k in ("kind", "run_id", "workflow_id", "version", "state", "output")
            if k in row_output}


def _fault(v: Visit, sp: StepProgress) -> None:
    fault = v.services.get(AFTER_CHILD_COMMIT)      # the tests' kill point; absent in production
    if fault is not None:
        fault(v.lease.run_id, sp.node.id)       # may raise: the visit dies as a killed worker's would


class Child:
    """`StepKind` of node kind `child`."""

    async def advance(self, v: Visit, p: Progress, sp: StepProgress, now: datetime,
                      dues: list[tuple[datetime, str]]) -> bool:
        c = sp.node.child
        assert c is not None
        a = sp.last if sp.state == "running" else None
        if a is None:
            existing = await v.store.fetchrow("child_of_step", run_id=v.lease.run_id, epoch=v.lease.epoch,
                                              step_id=sp.node.id, kind="action")
            a = b_start = v.batch.start(sp.node.id, sp.next_attempt, "action", now)
            if existing is None:
                try:
                    child_id = await self._start(v, p, sp, c, b_start, now)
                except A44Error as err:     # nothing was created: the step fails for good
                    v.batch.finish(b_start, "failed", now, error=err)
                    p.add(b_start)
                    p.finished(b_start)
                    return True
                p.add(a)
                if c.wait == "none":
                    v.batch.finish(a, "succeeded", now, result={"kind": "child", "run_id": child_id,
                                                                "workflow_id": c.workflow_id, "version": c.version})
                    p.finished(a)
                    v.event("child.started", step=sp.node.id, child=child_id)
                    return True
                # committed now, before anything else this visit does: the child exists exactly when the attempt
                # that created it is recorded, and a crash from here on finds both
                await v.batch.commit(now)
                v.event("child.started", step=sp.node.id, child=child_id)
                _fault(v, sp)
                dues.append((now + timedelta(milliseconds=c.timeout_ms), WAITING))
                return False
            p.add(a)
        row = await v.store.fetchrow("child_wait", run_id=v.lease.run_id, epoch=v.lease.epoch, step_id=sp.node.id)
        if row is None:     # started in this visit's batch, not committed yet: look again after the release
            dues.append((a.started_at + timedelta(milliseconds=c.timeout_ms), WAITING))
            return False
        if row["state"] == OPEN and now >= row["timeout_at"]:
            await v.store.fetchrow("wait_timeout", run_id=v.lease.run_id, epoch=v.lease.epoch, step_id=sp.node.id,
                                   now=now)
            row = await v.store.fetchrow("child_wait", run_id=v.lease.run_id, epoch=v.lease.epoch,
                                         step_id=sp.node.id)
            assert row is not None
        if row["state"] == OPEN:
            _fault(v, sp)
            dues.append((row["timeout_at"], WAITING))
            return False
        if row["state"] == TIMED_OUT and c.on_timeout == "cancel":
            # before the parent's commit and repeated by any later look until it commits (the cancel of a
            # finished run is a no-op): the child never outlives a timed-out wait it was not told to survive
            await v.store.fetchrow("run_cancel", run_id=row["key"], project=v.lease.project_id,
                                   by=f"run:{v.lease.run_id}", reason="timeout", compensate=False,
                                   message=f"the step {sp.node.id} of parent run {v.lease.run_id} timed out",
                                   now=now)
        self._finish(v, p, sp, c, a, row, now)
        return True

    async def _start(self, v: Visit, p: Progress, sp: StepProgress, c: ChildIR, a: Attempt, now: datetime) -> str:
        """Check what the child needs and append its creation to the batch of attempt `a`; its run id."""
        L = v.lease
        lineage = await v.store.fetchrow("child_lineage", run_id=L.run_id)
        depth = (lineage["depth"] if lineage is not None else 0) + 1
        if depth > MAX_DEPTH:
            raise A44Error(E_CHILD_LIMIT, f"step {sp.node.id} would start a child at depth {depth}; at most "
                                          f"{MAX_DEPTH}", step_id=sp.node.id, details={"depth": depth})
        version = await v.store.fetchrow("version_get", project=L.project_id, workflow_id=c.workflow_id,
                                         version=c.version)
        if version is None:
            raise A44Error(E_CHILD_LIMIT, f"step {sp.node.id}: workflow {c.workflow_id} version {c.version} is not "
                                          f"published", step_id=sp.node.id,
                           hint="publish the child workflow with its parent")
        ir = version["ir"]
        input = self._input(v, p, sp, c)
        from ..ingestion.runs import workflow_partition_key

        try:
            key = await workflow_partition_key(ir, input, {"id": "child", "type": "child"})
        except A44Error as err:
            raise A44Error(E_CHILD_INPUT_INVALID, f"step {sp.node.id}: {err.message}", step_id=sp.node.id) from None
        child_id = new_run_id(now)
        v.batch.child_start(a, child_id, c.workflow_id, c.version, input, key, ir.get("queue"), c.wait,
                            c.on_parent_cancel, now + timedelta(milliseconds=c.timeout_ms), now)
        return child_id

    def _input(self, v: Visit, p: Progress, sp: StepProgress, c: ChildIR) -> Any:
        scope = Steps(v, p).render_scope(sp.node.id, sp.next_attempt)
        try:
            value = render_params(c.input, scope, deadline=time.monotonic() + RENDER_BUDGET_S)
        except A44Error as err:
            raise A44Error(E_CHILD_INPUT_INVALID, f"step {sp.node.id}: the child's input could not be rendered: "
                                                  f"{err.message}", step_id=sp.node.id) from None
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise A44Error(E_CHILD_INPUT_INVALID, f"step {sp.node.id}: the child's input is a "
                                                  f"{type(value).__name__}, not an object", step_id=sp.node.id)
        try:
            size = len(encode_json(value).encode())
        except A44Error as err:
            raise A44Error(E_CHILD_INPUT_INVALID, f"step {sp.node.id}: the child's input is not JSON: "
                                                  f"{err.message}", step_id=sp.node.id) from None
        if size > MAX_INPUT_BYTES:
            raise A44Error(E_CHILD_INPUT_INVALID, f"step {sp.node.id}: the child's input is {size} bytes; at most "
                                                  f"{MAX_INPUT_BYTES}", step_id=sp.node.id)
        return value

    def _finish(self, v: Visit, p: Progress, sp: StepProgress, c: ChildIR, a: Attempt, row: Any,
                now: datetime) -> None:
        b = v.batch
        b.wait_resumed(sp.node.id, now)
        out = row["output"] or {}
        state = row["state"]
        if state == SATISFIED and (c.wait == "started" or out.get("state") in SUCCESS):
            b.finish(a, "succeeded", now, result=child_output(out))
            v.event("child.ended", step=sp.node.id, child=out.get("run_id"), state=out.get("state"))
        elif state == SATISFIED:
            b.finish(a, "failed", now, error=A44Error(
                E_CHILD_FAILED, f"step {sp.node.id}: child run {out.get('run_id')} of {c.workflow_id} ended "
                                f"{out.get('state')} ({out.get('error_code')}: {out.get('error_message')})",
                step_id=sp.node.id, details={"child_run_id": out.get("run_id"), "child_state": out.get("state"),
                                             "child_error_code": out.get("error_code")}))
            v.event("child.failed", step=sp.node.id, child=out.get("run_id"), code=out.get("error_code"))
        elif state == TIMED_OUT:
            b.finish(a, "failed", now, error=A44Error(
                E_CHILD_TIMEOUT, f"step {sp.node.id}: child run {row['key']} of {c.workflow_id} did not end within "
                                 f"{c.timeout_ms} ms" + (" (it was cancelled)" if c.on_timeout == "cancel" else
                                                         " (it runs on: childOnTimeout keep)"),
                step_id=sp.node.id, details={"child_run_id": row["key"]}))
            v.event("child.timed_out", step=sp.node.id, child=row["key"])
        else:       # closed by the parent's own end (a cancel, the deadline)
            b.finish(a, "failed", now, error=A44Error(E_RUN_CANCELLED, f"the wait of step {sp.node.id} for its "
                                                                       "child was closed: its run is ending",
                                                      step_id=sp.node.id))
        p.finished(a)


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
