"""A fan-out step's partitions: their plan (partition_plan.py: computed once, recorded, read back) and the driving
of one step's partitions inside a visit: which partition starts next (at most `concurrency` in flight), and how the
step ends once every partition is final (results in partition order; `onPartitionFailure` decides what failed
partitions mean).

A partition is a `PartProgress`: its attempts are step_attempts rows with step_id `step[partition]`, so they go
through the same start/finish/retry/lease-expiry path as a step's, under the same run lease.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from ...errors import E_PARTITIONS_FAILED, E_PARTITIONS_INVALID, A44Error
from .journal import PlanConflict
from .partition_locks import PartitionLocks
from .partition_plan import Planner, source
from .progress import PartProgress, Progress, StepProgress

if TYPE_CHECKING:
    from .dag_steps import Steps
    from .journal import Batch
    from .visit import Visit

PLAN_TRIES = 5        # a since-last-success plan refused because another run took a key is planned again


class FanOut:
    """The partitions of fan-out steps within one visit of a run."""

    def __init__(self, v: Visit, p: Progress, steps: Steps):
        self.v = v
        self.p = p
        self.steps = steps                  # calls and records the partitions' attempts (dag_steps.py)
        self.planner = Planner(v)
        self.locks = PartitionLocks(v, p, steps)

    async def _plan(self, b: Batch, sp: StepProgress, now: datetime) -> list[PartProgress] | None:
        """The step's partitions at its first visit: read back when recorded, else computed and recorded with this
        transition (a since-last-success plan commits at once, under its workflow step's lock, and is computed
        again while another run takes one of its keys first). None when planning failed the step."""
        p, node = self.p, sp.node
        recorded = p.plans.get(node.id)
        if recorded is not None:
            parts = p.plan(node.id, recorded)
            for pp in parts:           # a new epoch (replay) stamps its rows
                self.steps.note_partition(b, pp, now)
            return parts
        exclusive = node.partitions.since is not None
        if exclusive:
            await b.commit(now)          # what this visit wrote before must not be lost with a refused plan
        for _ in range(PLAN_TRIES):
            try:
                keys = await self.planner.keys(node, self.steps.cel_scope(node.id))
            except A44Error as err:
                p.add(b.record(node.id, sp.next_attempt, "action", "failed", now, error=err))
                return None
            parts = p.plan(node.id, keys)
            b.plan(node.id, source(node.partitions), keys, exclusive, now)
            for pp in parts:
                self.steps.note_partition(b, pp, now)
            if not exclusive:
                return parts
            try:
                await b.commit(now)
            except PlanConflict:
                del p.fanout[node.id]
                self.v.event("partitions.replanned", step=node.id)
                continue
            p.plans[node.id] = keys
            return parts
        err = A44Error(E_PARTITIONS_INVALID, f"step {node.id}: other runs kept taking its partitions while it "
                                             f"planned ({PLAN_TRIES} tries)", step_id=node.id,
                       hint="runs of this workflow compete for the same partitions: limit its concurrency")
        p.add(b.record(node.id, sp.next_attempt, "action", "failed", now, error=err))
        return None

    async def advance(self, b: Batch, sp: StepProgress, now: datetime, dues: list, busy: set[str],
                      starts: list) -> bool:
        """Start what may start of step `sp`'s partitions; end the step when all are final. True when the step
        ended or a partition ran on the spot (successors or other partitions may be ready)."""
        p, node = self.p, sp.node
        parts = p.fanout.get(node.id)
        if parts is None:
            parts = await self._plan(b, sp, now)
            if parts is None:
                return True
        prefix = node.id + "["
        in_flight = sum(1 for k in busy if k.startswith(prefix))
        done_before = sum(1 for pp in parts if pp.done)
        blocked = await self.locks.gate(b, parts, busy, in_flight, now, dues)     # one run per partition
        changed = sum(1 for pp in parts if pp.done) > done_before       # skipped for a conflict
        for pp in parts:
            if in_flight >= node.partitions.concurrency:
                break
            if pp.key in busy or pp.done or pp.state == "failed" or pp.partition in blocked:
                continue
            if pp.state == "retry" and now < pp.last.retry_at:
                dues.append((pp.last.retry_at, "waiting"))
                continue
            if self.v.inline(node):
                await self.steps.run_inline(b, pp, now)
                changed = True
                continue
            a = b.start(pp.key, pp.next_attempt, "action", now)
            p.add(a)
            self.steps.note_partition(b, pp, now)
            busy.add(pp.key)
            starts.append((a, pp))
            in_flight += 1
        if in_flight == 0 and all(pp.done or pp.state == "failed" for pp in parts):
            self._end(b, sp, parts, now)
            return True
        return changed

    def _end(self, b: Batch, sp: StepProgress, parts: list[PartProgress], now: datetime) -> None:
        p, node = self.p, sp.node
        failed = [pp for pp in parts if pp.state == "failed"]
        if failed and node.partitions.on_failure != "partial":
            err = failure(node.id, failed, len(parts))
            p.add(b.record(node.id, sp.next_attempt, "action", "failed", now, error=err))
            return
        a = b.record(node.id, sp.next_attempt, "action", "succeeded", now, result=[pp.output for pp in parts])
        p.add(a)
        p.finished(a)


def failure(step_id: str | None, failed: list[PartProgress], total: int | None = None) -> A44Error:
    """E_PARTITIONS_FAILED naming each failed partition and why (the `partial` run's record)."""
    listed = [{"step": pp.node.id, "partition": pp.partition, "state": pp.shown, "error_code": pp.last.error_code,
               "error_message": pp.last.error_message} for pp in failed]
    names = ", ".join(f"{f['step']}[{f['partition']}] ({f['error_code']})" for f in listed)
    of = f" of {total}" if total is not None else ""
    return A44Error(E_PARTITIONS_FAILED, f"{len(failed)}{of} partition(s) failed after their retries: {names}",
                    step_id=step_id, details={"failed_partitions": listed},
                    hint="a44 automation replay RUN --failed-partitions runs exactly those again; "
                         "a44 automation runs skip RUN --partition P --reason ... skips one for good")
