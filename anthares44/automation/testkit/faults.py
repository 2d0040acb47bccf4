"""Faults an Env can inject into the real engine: a worker dying between an effect and its record, a lease taken
away, the database restarting.

`kill_worker(at="after_effect_before_record", step=S)`: the next visit whose call of step S has just returned
(the effect is done: the mock recorded it) dies there, through the engine's fault point (runtime/engine/invoke.py
`AFTER_EFFECT`): nothing of the outcome is recorded, the attempt stays `running` and the lease stays held until
its deadline passes on virtual time. The worker is retired and a new one (a restarted daemon, another worker id)
takes its place; when the lease has expired, a claim re-grants the run, the interrupted attempt becomes
`lease_expired` and the step runs again with the same idempotency key (§7.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..stdlib_connectors.protocol import StepContext

if TYPE_CHECKING:
    from .env import Env

POINTS = ("after_effect_before_record",)


class WorkerKilled(Exception):
    """Raised at a fault point: the visit ends as if its process had died there."""


@dataclass(frozen=True)
class Kill:
    run_id: str
    step_id: str
    attempt: int
    idempotency_key: str
    at: datetime


class Faults:
    def __init__(self, env: Env):
        self.env = env
        self.kills: list[Kill] = []
        self.dead: set = set()            # engines a kill hit this round
        self.retired: list = []           # engines replaced after a kill (closed with the Env)
        self._armed: list[tuple[str | None, int | None]] = []     # (step, kills left; None: once per run)
        self._killed: set[tuple[str, str]] = set()
        self._restarts = 0

    # --- kill_worker ------------------------------------------------------------------------------------------
    def kill_worker(self, at: str, step: str | None, *, times: int | None = 1) -> None:
        """Arm a kill at `at` for calls of `step` (None: any step): the next `times` such calls die (None: the
        first call of every run's step). A run's step is killed at most once, so it completes on its next visit."""
        if at not in POINTS:
            raise ValueError(f"fault point {at!r} is not one of {', '.join(POINTS)}")
        self._armed.append((step, times))

    def after_effect(self, ctx: StepContext) -> None:
        """The engine's AFTER_EFFECT hook (every worker of the Env)."""
        if (ctx.run_id, ctx.step_id) in self._killed:
            return
        for i, (step, left) in enumerate(self._armed):
            if step is not None and step != ctx.step_id:
                continue
            if left is not None:
                if left <= 0:
                    continue
                self._armed[i] = (step, left - 1)
            self._killed.add((ctx.run_id, ctx.step_id))
            self.kills.append(Kill(ctx.run_id, ctx.step_id, ctx.attempt, ctx.idempotency_key, self.env.clock.now()))
            holder = next((w for w in self.env.workers if w.drivers.get(ctx.run_id) is not None), None)
            if holder is not None:
                self.dead.add(holder)
            raise WorkerKilled(f"worker killed after the effect of {ctx.step_id} (attempt {ctx.attempt}) of run "
                               f"{ctx.run_id}, before its record")

    async def replace_dead(self) -> bool:
        """After a round: replace the workers that died in it with new ones. True when there were any."""
        gone = [w for w in self.env.workers if w in self.dead]
        for w in gone:
            self.env.workers.remove(w)
            self.dead.discard(w)
            self.retired.append(w)
            self._restarts += 1
            await self.env.new_worker(f"{w.worker_id.split('~')[0]}~{self._restarts}")
        return bool(gone)

    # --- leases and the database ------------------------------------------------------------------------------
    def expire_lease(self, run_id: str) -> None:
        """The run's lease deadline becomes now: the next claim re-grants it, its holder's writes are refused."""
        env = self.env
        row = env.call(env.store.get_run(run_id))
        if row["lease_owner"] is None:
            raise ValueError(f"run {run_id} is not leased (state {row['state']})")
        env.call(env.store.fetchval("lease_renew", run_id=run_id, owner=row["lease_owner"],
                                    grant=row["lease_grants"], deadline=env.clock.now()))

    def restart_postgres(self) -> None:
        """Stop the test process's embedded PostgreSQL and start it again (every connection is cut)."""
        if self.env.postgres is None:
            raise RuntimeError("this Env was not given its TestPostgres (the a44_env fixture gives it)")
        self.env.postgres.restart()
        # what the daemon finds out from its first failed statement: the pooled connections are gone
        self.env.call(self.env.store.pool.expire_connections())
