"""A fan-out step's partitions: their plan (partition_plan.py: computed once, recorded, read back) and the driving
of one step's partitions inside a visit: which partition starts next (at most `concurrency` in flight), and how the
step ends once every partition is final (results in partition order; `onPartitionFailure` decides what failed
partitions mean).

A partition is a `PartProgress`: its attempts are step_attempts rows with step_id `step[partition]`, so they go
through the same start/finish/retry/lease-expiry path as a step's, under the same run lease.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...errors import E_PARTITIONS_FAILED, E_PARTITIONS_INVALID, A44Error
from .fanout_cursor import Cursor
from .item_plan import stored
from .journal import PlanConflict
from .partition_locks import PartitionLocks
from .partition_plan import Planner, source
from .progress import PartProgress, Progress, StepProgress

if TYPE_CHECKING:
    from .dag_steps import Steps
    from .journal import Batch
    from .visit import Visit

RESULT_LIST_MAX = 10_000   # a step's result lists its partitions' results up to this many (today's limit)
FAILED_LISTED = 100        # failed partitions named in E_PARTITIONS_FAILED (the count says how many in all)
INLINE_CHUNK = 1_000  # `pass` partitions run on the spot per transaction
PLAN_TRIES = 5        # a since-last-success plan refused because another run took a key is planned again


class FanOut:
    """The partitions of fan-out steps within one visit of a run."""

    def __init__(self, v: Visit, p: Progress, steps: Steps):
        self.v = v
        self.p = p
        self.steps = steps                  # calls and records the partitions' attempts (dag_steps.py)
        self.planner = Planner(v)
        self.locks = PartitionLocks(v, p, steps)
        self.cursors: dict[str, Cursor] = {}     # step id -> where its partitions stand in this visit

    async def _plan(self, b: Batch, sp: StepProgress, now: datetime) -> list[PartProgress] | None:
        """The step's partitions at its first visit: read back when recorded, else computed and recorded with this
        transition (a since-last-success plan commits at once, under its workflow step's lock, and is computed
        again while another run takes one of its keys first). None when planning failed the step."""
        p, node = self.p, sp.node
        recorded = p.plans.get(node.id)
        if recorded is not None:
            parts = p.plan(node.id, recorded, p.items.get(node.id))
            if p.plan_epochs.get(node.id, self.v.lease.epoch) != self.v.lease.epoch:
                # a new epoch (replay): the rows of what runs again are rewritten one by one, those reused are
                # stamped with the epoch in one statement (a 100,000-item step must not send 100,000 operations)
                b.partition_epoch(node.id, now)
                for pp in parts:
                    if not pp.done:
                        self.steps.note_partition(b, pp, now)
            return parts
        if node.partitions.foreach is not None:
            return self._plan_items(b, sp, await self._items(b, sp, now), now)
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

    async def _items(self, b: Batch, sp: StepProgress, now: datetime) -> tuple[list[str], list] | None:
        try:
            return await self.planner.items(sp.node, self.steps.cel_scope(sp.node.id))
        except A44Error as err:          # refused whole: no item, no partition row is written
            self.p.add(b.record(sp.node.id, sp.next_attempt, "action", "failed", now, error=err))
            return None

    def _plan_items(self, b: Batch, sp: StepProgress, planned: tuple[list[str], list] | None,
                    now: datetime) -> list[PartProgress] | None:
        """A `foreach` plan: the items once in partition_items and every pending partition row, in two
        statements of this transition (item_plan.py, migration 0038)."""
        if planned is None:
            return None
        keys, items = planned
        node = sp.node
        parts = self.p.plan(node.id, keys, items)
        b.plan(node.id, source(node.partitions), None, False, now)
        b.partition_items(node.id, stored(keys, items), now)
        return parts

    async def advance(self, b: Batch, sp: StepProgress, now: datetime, dues: list, busy: set[str],
                      starts: list) -> bool:
        """Start what may start of step `sp`'s partitions; end the step when all are final. True when the step
        ended or a partition ran on the spot (successors or other partitions may be ready). The cost follows
        the partitions in flight, not the step's size (fanout_cursor.py)."""
        p, node = self.p, sp.node
        parts = p.fanout.get(node.id)
        if parts is None:
            parts = await self._plan(b, sp, now)
            if parts is None:
                return True
        cur = self.cursors.get(node.id)
        if cur is None:
            cur = self.cursors[node.id] = Cursor(parts)
        prefix = node.id + "["
        in_flight = sum(1 for k in busy if k.startswith(prefix))
        inline = self.v.inline(node)
        slots = INLINE_CHUNK if inline else node.partitions.concurrency - in_flight
        before = sum(1 for pp in cur.open.values() if pp.done)
        go = await self.locks.gate(b, node, cur.candidates(busy, now, dues), slots, now, dues, inline=inline) \
            if slots > 0 else []
        changed = sum(1 for pp in cur.open.values() if pp.done) > before      # skipped for a conflict
        if go:
            # stamped once the locks are held: a key another run just released must not be recorded as started
            # before that run's attempt finished (the lock round trip takes time; `now` was read before it)
            now = max(now, self.v.clock.now())
        for pp in go:
            if inline:
                await self.steps.run_inline(b, pp, now)
                changed = True
                continue
            a = b.start(pp.key, pp.next_attempt, "action", now)
            p.add(a)
            self.steps.note_partition(b, pp, now)
            busy.add(pp.key)
            starts.append((a, pp))
            in_flight += 1
        if inline and go:
            await b.commit(self.v.clock.now())       # a chunk of `pass` items per transaction, not all at once
        if in_flight == 0 and cur.finished():
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
        a = b.record(node.id, sp.next_attempt, "action", "succeeded", now, result=step_result(parts))
        p.add(a)
        p.finished(a)


def step_result(parts: list[PartProgress]) -> Any:
    """The partitions' results in partition order (null for one that failed); beyond RESULT_LIST_MAX partitions
    their counts instead ({items, succeeded, skipped, failed}): the step's one result row must not grow with the
    number of items (each item's result is its own attempt's, `partitions RUN` pages them)."""
    if len(parts) <= RESULT_LIST_MAX:
        return [pp.output for pp in parts]
    counts = {"items": len(parts), "succeeded": 0, "skipped": 0, "failed": 0}
    for pp in parts:
        counts["succeeded" if pp.state == "succeeded" else "skipped" if pp.state == "skipped" else "failed"] += 1
    return counts


def failure(step_id: str | None, failed: list[PartProgress], total: int | None = None) -> A44Error:
    """E_PARTITIONS_FAILED naming each failed partition and why (the `partial` run's record): the first
    FAILED_LISTED of them, with how many there are (`partitions RUN --state failed` pages the rest)."""
    listed = [{"step": pp.node.id, "partition": pp.partition, "state": pp.shown, "error_code": pp.last.error_code,
               "error_message": pp.last.error_message} for pp in failed[:FAILED_LISTED]]
    names = ", ".join(f"{f['step']}[{f['partition']}] ({f['error_code']})" for f in listed)
    if len(failed) > FAILED_LISTED:
        names += f" and {len(failed) - FAILED_LISTED} more (a44 automation partitions RUN --state failed)"
    of = f" of {total}" if total is not None else ""
    return A44Error(E_PARTITIONS_FAILED, f"{len(failed)}{of} partition(s) failed after their retries: {names}",
                    step_id=step_id, details={"failed_partitions": listed, "failed_count": len(failed)},
                    hint="a44 automation replay RUN --failed-partitions runs exactly those again; "
                         "a44 automation runs skip RUN --partition P --reason ... skips one for good")
