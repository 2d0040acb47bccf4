"""One visit of a leased run, as its strategies and helpers see it: the run (`Run`: claimed row, lease, IR,
deadline, complete before anything is driven), the `Visit` context they are handed instead of the driver, and the
machinery both strategies share: the run's endings (terminal state, queue redelivery, partition wake-up), its
release to a durable wait, and the way back through the saga.

The protocols a strategy implements (`Strategy`, registered by IR kind in strategies.py) and a step kind the DAG
strategy delegates to (`StepKind`, registered by node kind there) live here too, so that adding one is a new module
and one line in strategies.py.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from ...compiler.retry_policy import Failure
from ...errors import E_RUN_DEADLINE, A44Error
from .journal import Batch, Lease
from .saga import Saga, Undo
from .states import COMPENSATING, WAITING

if TYPE_CHECKING:
    from ...clock import Clock
    from ...compiler.ir import NodeIR, WorkflowIR
    from ...stdlib_connectors.registry import ConnectorRegistry
    from ..store.core import Store
    from .cancel_request import CancelRequest
    from .progress import Progress, StepProgress

RELEASED = "released"       # a visit that ends on shutdown: the run is handed back, due now for any worker


@dataclass(frozen=True)
class Run:
    """The run a visit drives, as claimed: its row, its lease, its IR and its wall-clock deadline (§3.1)."""
    row: Mapping[str, Any]
    lease: Lease
    ir: WorkflowIR
    deadline: datetime

    @classmethod
    def of(cls, row: Mapping[str, Any], lease: Lease, ir: WorkflowIR) -> Run:
        # a replayed run (epoch > 0, §13) gets a fresh wall clock: replay wrote its deadline_at from the IR
        deadline = row["deadline_at"] if lease.epoch else \
            min(row["deadline_at"], row["created_at"] + timedelta(milliseconds=ir.deadline_ms))
        return cls(row, lease, ir, deadline)

    @property
    def run_id(self) -> str:
        return self.lease.run_id


@dataclass(frozen=True)
class Visit:
    """What a strategy and its helpers need of the engine for one visit: no helper holds the driver or the engine.
    `batch` is the visit's one `Batch` (each decision point commits it); `event` logs and counts a state change."""
    run: Run
    store: Store
    clock: Clock
    rng: random.Random
    batch: Batch
    cancel: CancelRequest
    registry: ConnectorRegistry
    services: dict[str, Any]
    log: Callable[..., None]                # Engine.event(what, run_id, **fields)
    stopping: Callable[[], bool]            # the engine is shutting down: release instead of starting work
    program: Callable[..., Any]             # Engine.program: the loaded CEL program of an expression, cached
    inline: Callable[[NodeIR], bool]        # Engine.inline: a step without external effect (`pass`)

    @property
    def lease(self) -> Lease:
        return self.run.lease

    @property
    def row(self) -> Mapping[str, Any]:
        return self.run.row

    def event(self, what: str, **fields: Any) -> None:
        self.log(what, self.run.lease.run_id, **fields)

    def deadline_error(self, step_id: str) -> A44Error:
        """§3.1: past the run's wall-clock limit, the next step fails for good."""
        return A44Error(E_RUN_DEADLINE, f"the run passed its wall-clock limit ({self.run.deadline.isoformat()}) "
                                        f"before step {step_id} finished", step_id=step_id)

    # --- endings both strategies share -----------------------------------------------------------------------
    def after_terminal(self, now: datetime, *, failed: bool = False, error: A44Error | None = None) -> None:
        """Queues (docs/queues.md): a failed run is redelivered or dead-lettered in the same transaction (at once
        when `error` is permanent); a run of a partition wakes the daemons for its successor (0007 trigger)."""
        if self.row["queue"] is None:
            return
        if failed:
            # the redelivered run is of the same version: its wall clock is the version's deadline_ms (§19)
            permanent = error is not None and not Failure.of(error).retryable
            self.batch.after_failure(now, now + timedelta(milliseconds=self.run.ir.deadline_ms), permanent=permanent)
        elif self.row["partition_key"] is not None:
            self.batch.wake_partition(now)

    async def end(self, state: str, now: datetime, *, summary: dict, error: A44Error | None = None,
                  result: Any = None, failed_step: str | None = None, failed: bool = False,
                  cause: A44Error | None = None, event: dict[str, Any] | None = None, **fields: Any) -> str:
        """End the run in `state` (one commit): the transition, a run `event` after it (an alert, `run.partial`),
        what its queue does about it (`failed`: redelivered or dead-lettered for `cause`, default `error`)."""
        b = self.batch
        b.transition(state, now, release=True, failed_step=failed_step, error=error, result=result, summary=summary,
                     finished=True)
        if event is not None:
            b.event(**event, at=now)
        self.after_terminal(now, failed=failed, error=cause if cause is not None else error)
        await b.commit(now)
        self.event(f"run.{state}", **fields)
        return state

    async def release_until(self, state: str, due: datetime, now: datetime, *, lock_waits: bool,
                            timers: bool = False) -> str:
        """Nothing runs now: release the lease until `due` (a retry delay, a sleep's end, a partition lock's
        recheck), at the latest the run's deadline. `lock_waits`: a partition lock was refused in this visit, so
        the run is made due at once if it freed meanwhile (partition_locks.py: no lost wake-up); `timers`: a
        sleep is open, so a wake committed during the visit makes the run due at once (sleeps.py)."""
        b = self.batch
        b.transition(state, now, next_wake_at=min(due, self.run.deadline), release=True)
        if lock_waits:
            b.partition_wait_check(now)
        if state == WAITING:
            b.wait_check(now)   # a signal that closed a wait of this visit meanwhile makes it due now (waits.py)
        if timers:
            b.timer_check()
        await b.commit(now)
        self.event(f"run.{state}", until=due.isoformat())
        return state

    async def compensate(self, plan: list[Undo], now: datetime, failed_step: str | None, error: A44Error,
                         ledger: Ledger, *, announce: bool = True) -> str:
        """Turn to compensating (§6.1) and run the saga over `plan` (reverse completion order)."""
        self.batch.transition(COMPENSATING, now, failed_step=failed_step, error=error)
        if announce:
            self.event("run.compensating", step=failed_step, code=error.code)
        return await Saga(self, ledger, plan, failed_step, error).run()


class Ledger(Protocol):
    """What the saga asks the strategy: the run's summary, and when anything last finished."""

    def summary(self) -> dict: ...

    def latest_finish(self) -> datetime | None: ...


class Strategy(Ledger, Protocol):
    """How a visit drives one kind of workflow (a DAG of YAML steps, a Python function, ...). Built complete by
    its `load` (strategies.py) from the `Visit` and what it reads of the run; `visit` returns the run state the
    visit left the run in, or 'released' (shutdown). Lease, fence, log and the endings are the Visit's."""

    async def visit(self) -> str: ...


class StepKind(Protocol):
    """A node kind the DAG strategy does not call a connector for (a durable `sleep`; later a timer, a wait, a
    child workflow). Its attempt stays `running` across visits: a new lease does not find it interrupted."""

    def advance(self, v: Visit, p: Progress, sp: StepProgress, now: datetime,
                dues: list[tuple[datetime, str]]) -> bool | Awaitable[bool]:
        """Start or look at step `sp` (writing to `v.batch`, noting what it wrote in `p`); True when it finished
        now (successors may be ready), else a due time in `dues` says when to look again (with the state the run
        waits in). A kind that reads the store first (a wait) returns an awaitable."""
        ...
