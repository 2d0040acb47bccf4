"""The interpreter's writes: one `Batch` per step transition, committed as ONE statement, grouped with the
transitions of other runs ready at the same moment.

A batch collects what a transition writes (finish attempt N, start attempt N+1 of the next steps, skip steps,
change the run's state, append an alert) and sends it as one `engine_commit` (migration 0018): the function first
passes the lease fence (a worker whose lease was re-granted writes nothing and gets `LeaseLost`), then applies the
operations in order, all or nothing. In an engine the batch goes through its `Committer` (committer.py), which
sends the transitions of all runs waiting at that moment as one `engine_commit_many` statement (0021), each run's
transition still all or nothing; without one (a `Batch` built alone), `write_alone` sends the statement directly.

Adding an operation kind: write `automation.engine_op_<kind>(op jsonb)` in a new migration (it reads its
arguments from `op` by name with `jsonb_to_record`, like the others in 0018, and raises A44LL / A44NR / A44IT, or
its own code mapped in `SIGNALS`, to refuse), then a `Batch` method that appends `("<kind>", {arguments})` to
`self._ops`. Arguments are JSON: datetimes travel as ISO 8601 with microseconds, JSON documents as text. Nothing
else changes: `engine_commit` calls the function by name.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from ...attempts import Attempt
from ...errors import E_LEASE_EXPIRED, A44Error
from ..store.core import Store
from ..store.results import encode_json
from .batch_packing import pack
from .progress import split_part
from .states import allowed_from, illegal

if TYPE_CHECKING:
    from .progress import PartProgress
    from .spans import VisitSpans

log = logging.getLogger("a44.engine")


def attempt_key(run_id: str, step_id: str, kind: str = "action") -> str:
    """The idempotency key a connector gets: `{run_id}:{step_id}` for every attempt of a step,
    `{run_id}:{step_id}:{partition}` for a partition's, `...:compensate` for a compensation."""
    split = split_part(step_id)
    base = f"{run_id}:{step_id}" if split is None else f"{run_id}:{split[0]}:{split[1]}"
    return base if kind == "action" else base + ":compensate"


class Commits(Protocol):
    """Where a batch's statement goes (committer.Committer: grouped with other runs' transitions, their NOTIFYs
    sent in the same transaction; `due`: the wait the batch released the run to)."""

    async def commit(self, lease: Lease, ops: str, current: str | None, at: datetime,
                     due: datetime | None = None) -> None: ...


class LeaseLost(Exception):
    """The run's lease is no longer ours (expired and re-granted, or released): stop touching the run."""


class CancelPending(Exception):
    """The batch would end the run succeeded or partial, but a person's cancel request is on it (migration 0045,
    A44CQ): nothing was written; the batch keeps what came before its end, and the driver cancels instead."""


class PlanConflict(Exception):
    """A since-last-success partition plan took a key another run processed or owns since it was computed:
    nothing was written; plan again."""


@dataclass(frozen=True)
class Lease:
    run_id: str
    project_id: str
    workflow_id: str
    owner: str
    grant: int
    epoch: int


class Notifier:
    """Sends, after commit, the NOTIFYs that the interpreter's transactions defer (migration 0006) when they do not
    go through a `Committer` (whose group statement sends its runs' NOTIFYs in its own transaction, 0026): run ids on
    `a44_run_events` (what `logs --follow` and `run --wait` listen to) and the earliest due time of the runs
    released to a wait on `a44_runs_due` (other daemons arm a timer; on waking they ask the database for the next
    due time, so the earliest is enough). One statement carries everything pending; while it is in flight new
    commits accumulate for the next one, so under load one notifying transaction serves many runs, and when idle
    a notification leaves right after its commit. Notifications are hints: listeners re-read the tables, and
    re-check on their own timers, so one lost with a crashed daemon only delays a follower."""

    def __init__(self, store: Store):
        self.store = store
        self._runs: set[str] = set()
        self._due: datetime | None = None
        self._task: asyncio.Task | None = None
        self._last = float("-inf")
        self._hurry = False                         # a terminal state is pending: do not wait out the interval
        self._nap: asyncio.Future | None = None     # the interval being waited out (bound to no loop in advance)

    def add(self, run_ids, due: datetime | None = None, *, at_once: bool = False) -> None:
        """Queue notifications; `at_once` (a run's terminal state: `run --wait` is waiting) skips what is left of
        the interval, so the statement leaves as soon as the one in flight, if any, is done."""
        self._runs.update(run_ids)
        if due is not None and (self._due is None or due < self._due):
            self._due = due
        if at_once:
            self._hurry = True
            if self._nap is not None and not self._nap.done():
                self._nap.set_result(None)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush())

    MIN_INTERVAL_S = 0.005     # at most ~200 notifying transactions a second; a follower waits 5 ms at worst

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._runs or self._due is not None:
            wait = self._last + self.MIN_INTERVAL_S - loop.time()
            if wait > 0 and not self._hurry:
                self._nap = nap = loop.create_future()
                timer = loop.call_later(wait, lambda: nap.done() or nap.set_result(None))  # noqa: B023 - cancelled below
                try:
                    await nap
                finally:
                    timer.cancel()
                    self._nap = None
            self._hurry = False
            self._last = loop.time()
            runs, due = list(self._runs), self._due
            self._runs, self._due = set(), None
            payload = None if due is None else str(int(due.timestamp() * 1000))
            try:
                await self.store.fetchval("engine_notify", run_ids=runs, due_ms=payload)
            except A44Error as exc:
                log.info("deferred notify of %d run(s) failed: %s", len(runs), exc)

    async def drain(self) -> None:
        """Wait until everything pending is sent (end of `run_once`, daemon shutdown)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)


class Batch:
    def __init__(self, store: Store, lease: Lease, worker_id: str, notifier: Notifier | None = None,
                 spans: VisitSpans | None = None, committer: Commits | None = None):
        self.store = store
        self.committer = committer
        self.spans = spans
        self.lease = lease
        self.worker_id = worker_id
        self.notifier = notifier
        self._due: datetime | None = None
        self._ops: list[tuple[str, dict[str, Any]]] = []
        self.current_step: str | None = None
        self._final = False         # the batch ends the run: its notification is not held (Notifier.add)
        self._end_at: int | None = None     # where in _ops the run's finishing transition starts

    def __bool__(self) -> bool:
        return bool(self._ops) or self.current_step is not None

    def _key(self, step_id: str, kind: str) -> str:
        # §2: every attempt of a step hands the connector the same key; a compensation gets its own
        return attempt_key(self.lease.run_id, step_id, kind)

    # --- attempts ---------------------------------------------------------------------------------------------
    def start(self, step_id: str, attempt: int, kind: str, at: datetime) -> Attempt:
        L = self.lease
        self._ops.append(("attempt_start", dict(run_id=L.run_id, step_id=step_id, attempt=attempt,
                                                key=self._key(step_id, kind), started_at=at, epoch=L.epoch, kind=kind,
                                                project=L.project_id, worker_id=self.worker_id, lease_grant=L.grant)))
        if kind == "action":
            self.current_step = step_id
        return Attempt(step_id, kind, attempt, "running", at)

    def finish(self, a: Attempt, status: str, at: datetime, *, result: Any = None, error: A44Error | None = None,
               retry_at: datetime | None = None) -> Attempt:
        L = self.lease
        stored = self.store.results.store(result, project_id=L.project_id, run_id=L.run_id, step_id=a.step_id,
                                          epoch=L.epoch, kind=a.kind, attempt=a.attempt)
        code, message = (error.code, error.message) if error else (None, None)
        self._ops.append(("attempt_finish", dict(
            run_id=L.run_id, step_id=a.step_id, epoch=L.epoch, kind=a.kind, attempt=a.attempt, started_at=a.started_at,
            status=status, error_code=code, error_message=message, result=stored.inline, result_ref=stored.ref,
            result_bytes=stored.size, finished_at=at, retry_at=retry_at)))
        if self.spans is not None:
            self.spans.ended(a, status, at, code, message)
        a.status, a.finished_at, a.error_code, a.error_message, a.retry_at = status, at, code, message, retry_at
        a.result = result
        return a

    def expire(self, a: Attempt, at: datetime) -> Attempt:
        """An attempt found `running` when its run was taken over was interrupted: it ends `lease_expired` (not a
        failure: it uses no budget and is tried again at once)."""
        return self.finish(a, "lease_expired", at, error=A44Error(
            E_LEASE_EXPIRED, f"the lease of the worker running attempt {a.attempt} expired", step_id=a.step_id))

    def record(self, step_id: str, attempt: int, kind: str, status: str, at: datetime, *,
               error: A44Error | None = None, result: Any = None, retry_at: datetime | None = None,
               finished_at: datetime | None = None) -> Attempt:
        """An attempt written once, already finished: `skipped`, failed before anything ran, or a step without
        external effect (`pass`) that ran on the spot. Results follow the 256 KB rule like `finish`."""
        L = self.lease
        finished_at = finished_at or at
        stored = self.store.results.store(result, project_id=L.project_id, run_id=L.run_id, step_id=step_id,
                                          epoch=L.epoch, kind=kind, attempt=attempt)
        code, message = (error.code, error.message) if error else (None, None)
        self._ops.append(("attempt_record", dict(
            run_id=L.run_id, step_id=step_id, attempt=attempt, key=self._key(step_id, kind), started_at=at,
            epoch=L.epoch, kind=kind, project=L.project_id, worker_id=self.worker_id, lease_grant=L.grant,
            status=status, error_code=code, error_message=message, result=stored.inline, result_bytes=stored.size,
            retry_at=retry_at, result_ref=stored.ref, finished_at=finished_at)))
        a = Attempt(step_id, kind, attempt, status, at, finished_at, code, message, result, retry_at)
        if self.spans is not None:
            self.spans.ended(a, status, finished_at, code, message)
        return a

    # --- timers (§19, migration 0034) ---------------------------------------------------------------------
    def sleep_open(self, a: Attempt, due: datetime) -> None:
        """Store the due instant of sleep attempt `a`, started in this batch: computed once, read back after."""
        self._ops.append(("sleep_open", dict(run_id=self.lease.run_id, step_id=a.step_id, epoch=self.lease.epoch,
                                             attempt=a.attempt, due_at=due)))
        a.due_at = due

    def sleep_fire(self, a: Attempt, at: datetime) -> Attempt:
        """Fire sleep `a` at `at`: only if its stored instant is still the one read (a wake or reschedule
        committed meanwhile makes the commit write nothing: LeaseLost), then finish it `succeeded` with how
        late it fired."""
        due = a.due_at
        assert due is not None
        self._ops.append(("sleep_fire", dict(run_id=self.lease.run_id, step_id=a.step_id, epoch=self.lease.epoch,
                                             attempt=a.attempt, due_at=due)))
        late_ms = max(0, round((at - due).total_seconds() * 1000))
        return self.finish(a, "succeeded", at, result={"due_at": due.isoformat(), "late_ms": late_ms})

    def timer_check(self) -> None:
        """After a release to `sleeping`: due no later than the earliest stored instant (a wake committed while
        the run was leased is not lost)."""
        self._ops.append(("timer_check", dict(run_id=self.lease.run_id)))

    def rows(self, step_id: str, rows: dict, at: datetime, partition: str = "") -> None:
        """The row counts a step reported (migration step_rows), with the attempt that produced them."""
        self._ops.append(("step_rows_record", dict(
            run_id=self.lease.run_id, step_id=step_id, partition=partition, epoch=self.lease.epoch,
            rows_in=rows.get("in"), rows_out=rows.get("out"), rows_error=rows.get("error"), now=at)))

    def partition(self, pp: PartProgress, at: datetime, rows: dict | None) -> None:
        """Mirror a YAML fan-out partition's state into `run_partitions` in the transaction of its attempt, with
        the row counts recorded for it (the step's `rows:`, docs/rows.md; None when it reports none)."""
        self.partition_row(pp.node.id, pp.partition, pp.ordinal, pp.shown, pp.actions, rows, at)

    def partition_row(self, step_id: str, partition: str, ordinal: int, state: str, actions: list[Attempt],
                      rows: dict | None, at: datetime) -> None:
        """A partition's (or a code `step.map` item's) row of `run_partitions`: its state as of `actions`."""
        L = self.lease
        first, last = (actions[0], actions[-1]) if actions else (None, None)
        self._ops.append(("partition_state", dict(
            run_id=L.run_id, project=L.project_id, workflow=L.workflow_id, step_id=step_id,
            partition=partition, ordinal=ordinal, epoch=L.epoch, state=state, attempts=len(actions),
            error_code=last.error_code if last else None, error_message=last.error_message if last else None,
            rows=None if rows is None else encode_json(rows), worker_id=self.worker_id if last else None,
            started_at=first.started_at if first else None, finished_at=last.finished_at if last else None,
            now=at)))

    def plan(self, step_id: str, source: str, keys: list[str] | None, exclusive: bool, at: datetime) -> None:
        """Record a fan-out step's partition plan (migration 0020); `exclusive` refuses keys of other runs; no
        keys for a `foreach` plan, whose items follow (`partition_items`)."""
        L = self.lease
        self._ops.append(("partition_plan", dict(
            run_id=L.run_id, project=L.project_id, workflow=L.workflow_id, step_id=step_id, source=source,
            keys=keys, epoch=L.epoch, exclusive=exclusive, now=at)))

    def partition_items(self, step_id: str, items: list[list], at: datetime) -> None:
        """A `foreach` plan's [key, item] pairs, stored once, and its partitions' pending rows (migration 0038)."""
        L = self.lease
        self._ops.append(("partition_items", dict(run_id=L.run_id, project=L.project_id, workflow=L.workflow_id,
                                                  step_id=step_id, epoch=L.epoch, items=items, now=at)))

    def partition_epoch(self, step_id: str, at: datetime) -> None:
        """A replay's epoch stamps the reused (success, skipped) partitions of a step, in one statement."""
        L = self.lease
        self._ops.append(("partition_epoch", dict(run_id=L.run_id, step_id=step_id, epoch=L.epoch, now=at)))

    def partition_conflict(self, step_id: str, partition: str, holder: str, reason: str, at: datetime) -> None:
        """A partition skipped because another run was processing it (partition_locks.py, migration 0031): who
        (`run:<id>`) and why, on its row."""
        self._ops.append(("partition_conflict", dict(run_id=self.lease.run_id, step_id=step_id, partition=partition,
                                                     holder=holder, reason=reason, now=at)))

    def partition_wait_check(self, at: datetime) -> None:
        """After a transition to `waiting` on a refused partition lock: due now if the key freed meanwhile."""
        self._ops.append(("partition_wait_check_v2", dict(run_id=self.lease.run_id, now=at)))

    def wait_check(self, at: datetime) -> None:
        """After a transition to `waiting`: due now if a wait of this epoch closed since the visit looked at it
        (waits.py, migration 0033)."""
        self._ops.append(("wait_check", dict(run_id=self.lease.run_id, epoch=self.lease.epoch, now=at)))

    def wait_resumed(self, step_id: str, at: datetime) -> None:
        """The wait step finishes from its wait's outcome, in this commit."""
        self._ops.append(("wait_resumed", dict(run_id=self.lease.run_id, epoch=self.lease.epoch, step_id=step_id,
                                               now=at)))

    # --- child workflows (§21, migration 0037) -----------------------------------------------------------------
    def child_start(self, a: Attempt, child_run_id: str, workflow_id: str, version: int, input: Any,
                    partition_key: str | None, queue: str | None, wait: str, on_parent_cancel: str,
                    timeout_at: datetime, at: datetime, traceparent: str | None = None) -> None:
        """Create the child run of attempt `a` (started in this batch) in its commit: once per step, epoch and
        kind (an action's child, or the run a compensation starts), with the parent's wait on it unless `none`;
        `traceparent`: the child's trace continues the parent's (its run span the child's parent)."""
        L = self.lease
        self._ops.append(("child_start", dict(traceparent=traceparent,
            run_id=L.run_id, epoch=L.epoch, step_id=a.step_id, kind=a.kind, child_run_id=child_run_id,
            project=L.project_id, workflow_id=workflow_id, version=version, input=input,
            partition_key=partition_key, queue=queue, wait=wait, on_parent_cancel=on_parent_cancel,
            timeout_at=timeout_at, now=at)))

    # --- the run ----------------------------------------------------------------------------------------------
    def transition(self, to: str, at: datetime, *, next_wake_at: datetime | None = None, release: bool = False,
                   failed_step: str | None = None, error: A44Error | None = None, result: Any = None,
                   summary: Any = None, finished: bool = False) -> None:
        L = self.lease
        code, message = (error.code, error.message) if error else (None, None)
        if finished:
            self._end_at = len(self._ops)
        self._ops.append(("run_transition", dict(
            run_id=L.run_id, owner=L.owner, grant=L.grant, to=to, allowed_from=allowed_from(to),
            next_wake_at=next_wake_at, release=release, failed_step=failed_step, error_code=code, message=message,
            result=None if result is None else encode_json(result),
            summary=None if summary is None else encode_json(summary), finished=finished, now=at)))
        self._final = self._final or finished
        if finished and self.spans is not None:
            self.spans.run_ended(to, at, code, message)
        if release and next_wake_at is not None:
            self._due = next_wake_at

    def after_failure(self, at: datetime, deadline: datetime, *, permanent: bool = False) -> None:
        """The run just ended `failed`: in the same transaction, redeliver the message as a new run while its
        queue's maxAttempts allows, else dead-letter it (`engine_op_queue_run_failed`; nothing for a run of no
        queue). A `permanent` failure (a 4xx, an expectation, a code not marked retryable) is dead-lettered at once:
        delivering the same message again would fail the same way."""
        from ..ingestion.ids import new_id
        from ..ulid import new_run_id

        L = self.lease
        self._ops.append(("queue_run_failed", dict(run_id=L.run_id, new_run_id=new_run_id(at), now=at,
                                                   deadline=deadline, dead_letter_id=new_id("dlq", at),
                                                   permanent=permanent)))
        self._due = at if self._due is None or at < self._due else self._due

    def wake_partition(self, at: datetime) -> None:
        """A partitioned run ends: its successor is promoted by the 0007 trigger; tell the daemons after commit."""
        self._due = at if self._due is None or at < self._due else self._due

    def event(self, kind: str, at: datetime, *, state: str | None = None, step_id: str | None = None,
              error_code: str | None = None, message: str | None = None, data: Any = None) -> None:
        L = self.lease
        self._ops.append(("run_event", dict(
            run_id=L.run_id, project=L.project_id, at=at, kind=kind, state=state, step_id=step_id, attempt=None,
            status=None, error_code=error_code, message=message, data=None if data is None else encode_json(data))))

    # --- commit -----------------------------------------------------------------------------------------------
    async def commit(self, at: datetime) -> None:
        """One statement: the fence, then every collected write in order. Raises LeaseLost when the lease is
        not ours, E_ILLEGAL_TRANSITION when the state machine refuses the change (nothing is written then)."""
        if not self:
            return
        L = self.lease
        ops, self._ops = self._ops, []
        current, self.current_step = self.current_step, None
        due, self._due = self._due, None
        final, self._final = self._final, False
        end_at, self._end_at = self._end_at, None
        try:
            if self.committer is not None:      # its NOTIFYs ride in the group's transaction (migration 0026)
                await self.committer.commit(L, encode_ops(ops), current, at, due)
            else:
                await write_alone(self.store, L, encode_ops(ops), current, at)
        except CancelPending:
            # nothing was written: what the visit recorded before the end (the last attempts) goes with the cancel
            self._ops = ops[:end_at] if end_at is not None else ops
            self.current_step = current
            if self.spans is not None:
                self.spans.discard()
            raise
        except BaseException:
            if self.spans is not None:
                self.spans.discard()
            raise
        if self.spans is not None:
            self.spans.committed()
        if self.committer is not None:
            return
        if self.notifier is not None:
            self.notifier.add((L.run_id,), due, at_once=final)
        else:   # no engine to defer to: notify now (the triggers stayed silent for this transaction)
            await self.store.fetchval("engine_notify", run_ids=[L.run_id],
                                      due_ms=None if due is None else str(int(due.timestamp() * 1000)))


async def write_alone(store: Store, L: Lease, ops: str, current: str | None, at: datetime) -> None:
    """One run's transition as its own `engine_commit` statement; a refusal raises the engine's exception."""
    try:
        await store.fetchval("engine_commit", run_id=L.run_id, owner=L.owner, grant=L.grant, current_step=current,
                             now=at, ops=ops)
    except A44Error as err:
        signal = SIGNALS.get((err.details or {}).get("sqlstate"))
        if signal is None:
            raise
        raise signal(L, err.__cause__) from None


def encode_ops(ops: list[tuple[str, dict[str, Any]]]) -> str:
    return json.dumps([{"op": kind, **args} for kind, args in pack(ops)], separators=(",", ":"), ensure_ascii=False,
                      default=encode_value)


def encode_value(value: Any) -> str:
    if isinstance(value, datetime):     # full precision: a finish matches its attempt on started_at
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    raise TypeError(f"{type(value).__name__} is not a journal argument")


def _lease_lost(L: Lease, cause: Any) -> Exception:
    return LeaseLost(L.run_id)


def _not_running(L: Lease, cause: Any) -> Exception:
    return LeaseLost(getattr(cause, "message", None) or L.run_id)


def _plan_conflict(L: Lease, cause: Any) -> Exception:
    return PlanConflict(getattr(cause, "message", None) or L.run_id)


def _cancel_pending(L: Lease, cause: Any) -> Exception:
    return CancelPending(getattr(cause, "message", None) or L.run_id)


def _illegal(L: Lease, cause: Any) -> Exception:
    return illegal(L.run_id, getattr(cause, "detail", None), getattr(cause, "hint", None) or "?")


# the SQLSTATEs an operation of 0018/0020 raises to refuse -> the exception the engine raises (nothing was written);
# the second argument carries the error's message, detail and hint (asyncpg's error, or a group's outcome)
SIGNALS = {"A44LL": _lease_lost, "A44NR": _not_running, "A44IT": _illegal, "A44PC": _plan_conflict,
           "A44CQ": _cancel_pending}
