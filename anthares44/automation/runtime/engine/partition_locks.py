"""One run per partition (docs/partitions.md "One run per partition"): a (workflow, step, partition key) is processed
by one run at a time, whatever the source of the keys. Before a fan-out step starts partitions, the run takes
their locks in one statement (`partition_locks_take`, migration 0031); a key another unfinished run holds is not
started here:

- `onConflict: wait` (default): the run waits for it. Other partitions and branches go on; when nothing else of
  the run can proceed it is released to `waiting` (no worker held), registered as a waiter of the key, and the
  holder's release (the transaction that ends the partition or the run) wakes it; LOCK_RECHECK bounds the wait
  should a wake-up be lost. A `partition.waiting` event names the key and the holder.
- `onConflict: skip`: the partition is recorded `skipped` (attempt status `skipped`, E_PARTITION_BUSY), its row's
  `skipped_by` = `run:<holder>`; a since-last-success plan does not count it as processed.

A lock belongs to the run (not its lease) and lives from the partition's first attempt until the partition or the
run ends; a run holds locks only of partitions it is processing, and processing one never waits for another lock,
so two runs cannot wait for each other.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ...errors import E_PARTITION_BUSY, A44Error
from .states import WAITING

if TYPE_CHECKING:
    from .dag_steps import Steps
    from .journal import Batch
    from .progress import PartProgress, Progress
    from .visit import Visit

LOCK_RECHECK = timedelta(minutes=1)


async def take_item(v: Visit, step_id: str, partition: str, now: datetime) -> str | None:
    """A code workflow's `step.map` item (code_visit.py): take its key's lock before its attempt; the holder's id
    when another run holds it (this run is then registered to be woken; the item suspends the visit as a retry
    wait does, and the other items go on)."""
    L = v.lease
    rows = await v.store.fetch("partition_locks_take", project=L.project_id, workflow=L.workflow_id,
                                           step=step_id, run_id=L.run_id, keys=[partition], wait=True, now=now)
    return rows[0]["holder"] if rows else None


class PartitionLocks:
    """The locks one visit of a run holds, and the gate its fan-out steps pass before starting partitions."""

    def __init__(self, v: Visit, p: Progress, steps: Steps):
        self.v = v
        self.p = p
        self.steps = steps
        self.held: set[tuple[str, str]] = set()         # (step, partition) taken in this visit
        self.waiting: set[tuple[str, str]] = set()      # refused and announced in this visit

    async def gate(self, b: Batch, node, pull: Callable[[int], list[PartProgress]], slots: int, now: datetime,
                   dues: list, *, inline: bool = False) -> list[PartProgress]:
        """Take the locks of the partitions that may start now: candidates come from `pull(n)` (the fan-out's
        cursor, fanout_cursor.py: at most n, in order) until `slots` of them hold their lock or none is left.
        Returns those to start; one held by another run is waited for (it stays with the cursor), or with
        `onConflict: skip` recorded skipped here. `inline`: the partitions run on the spot and end in the
        transaction that records them (a `pass` step), so they take no lock: only the keys another run holds are
        looked up, and those go through the take (waited for, skipped, or taken over if freed meanwhile)."""
        spec, L = node.partitions, self.v.lease
        go: list[PartProgress] = []
        blocked = False
        while slots > 0:
            batch = pull(slots)
            if not batch:
                break
            want = [pp for pp in batch if (node.id, pp.partition) not in self.held]
            refused: dict[str, str] = {}
            keys = [pp.partition for pp in want]
            if want and inline:
                # a lock taken and released around work with no effect writes two rows and commits once more
                # per chunk, and keeps nothing from running twice: look, and take only what another run holds
                rows = await self.v.store.fetch("partition_locks_held", project=L.project_id,
                                                workflow=L.workflow_id, step=node.id, run_id=L.run_id, keys=keys)
                keys = [r["partition"] for r in rows]
            if keys:
                rows = await self.v.store.fetch(
                    "partition_locks_take", project=L.project_id, workflow=L.workflow_id, step=node.id,
                    run_id=L.run_id, keys=keys, wait=spec.on_conflict != "skip", now=now)
                refused = {r["partition"]: r["holder"] for r in rows}
                self.held.update((node.id, k) for k in keys if k not in refused)
            for pp in batch:
                holder = refused.get(pp.partition)
                if holder is None:
                    slots -= 1
                    go.append(pp)
                elif spec.on_conflict == "skip":
                    self._skip(b, pp, holder, now)
                else:
                    blocked = True
                    self._wait(b, pp, holder, now)
        if blocked:
            dues.append((now + LOCK_RECHECK, WAITING))
        return go

    @property
    def waits(self) -> bool:
        """A key was refused in this visit: when the visit releases the run to a wait, the same transaction makes
        it due at once, after the transition, if a key it waits for freed meanwhile (no lost wake-up)."""
        return bool(self.waiting)

    def _skip(self, b: Batch, pp: PartProgress, holder: str, now: datetime) -> None:
        reason = f"run {holder} was processing partition {pp.partition} of step {pp.node.id} (onConflict: skip)"
        a = b.record(pp.key, pp.next_attempt, "action", "skipped", now, error=A44Error(
            E_PARTITION_BUSY, reason, step_id=pp.node.id))
        self.p.add(a)
        self.steps.note_partition(b, pp, now)
        b.partition_conflict(pp.node.id, pp.partition, f"run:{holder}", reason, now)
        self.v.event("partition.skipped", step=pp.key, holder=holder)

    def _wait(self, b: Batch, pp: PartProgress, holder: str, now: datetime) -> None:
        if (pp.node.id, pp.partition) in self.waiting:
            return
        self.waiting.add((pp.node.id, pp.partition))
        b.event("partition.waiting", now, step_id=pp.key, message=f"run {holder} is processing partition "
                f"{pp.partition} of step {pp.node.id}: waiting for it", data={"holder": holder})
        self.v.event("partition.waiting", step=pp.key, holder=holder)
