"""Drives one leased run through one visit: keeps the lease while the visit lasts, builds the visit's context
(visit.py: the run, its batch, the clock, the cancel request, what the engine shares), has the strategy of the
run's IR kind (strategies.py: the DAG of a YAML workflow, a Python workflow's function) load what it needs and
drive the run, and turns a lost lease into the outcome 'lost'.

The renewal pushes the lease deadline every lease/3 of the engine's clock, so a virtual clock drives it as it
drives every other wait; a renewal that finds the lease gone cancels the visit (it must stop touching the run).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...clock import sleep_for
from ...compiler.ir import WorkflowIR
from ...errors import E_RUN_CANCELLED, A44Error
from . import strategies
from .cancel_request import CancelRequest
from .journal import Batch, Lease, LeaseLost
from .spans import VisitSpans
from .visit import RELEASED, Run, Visit

if TYPE_CHECKING:
    from .worker import Engine

log = logging.getLogger("a44.engine")


class RunDriver:
    def __init__(self, engine: Engine, row: Mapping[str, Any], ir: WorkflowIR):
        self.engine = engine
        self.clock = engine.clock
        self.lease = Lease(row["run_id"], row["project_id"], row["workflow_id"], engine.worker_id,
                           row["lease_grants"], row["epoch"])
        self.run = Run.of(row, self.lease, ir)
        self.lost = False
        self.cancel = CancelRequest(row["error_code"] == E_RUN_CANCELLED)    # a person's (cancels.py)

    async def drive(self) -> str:
        """Returns how the visit ended: a run state, 'released' (shutdown) or 'lost' (lease taken away)."""
        task = asyncio.current_task()
        renewer = asyncio.create_task(self._renew(task))
        try:
            strategy = await strategies.load(await self._visit())
            outcome = await strategy.visit()
            if outcome == RELEASED:
                await self.engine.release(self.lease)
            return outcome
        except LeaseLost:
            self.lost = True
            self.engine.event("lease.lost", self.lease.run_id)
            return "lost"
        except asyncio.CancelledError:
            if self.lost:
                task.uncancel()
                self.engine.event("lease.lost", self.lease.run_id)
                return "lost"
            raise
        finally:
            renewer.cancel()
            self.cancel.close()

    async def _visit(self) -> Visit:
        e = self.engine
        spans = None        # VisitSpans when the engine traces (spans.py)
        if e.tracer is not None:
            spans = await VisitSpans.open(e.tracer, e.store, self.run.row, e.worker_id)
        batch = Batch(e.store, self.lease, e.worker_id, e.notifier, spans, e.committer)
        return Visit(self.run, e.store, self.clock, e.rng, batch, self.cancel, e.registry, e.services, e.event,
                     lambda: e.stopping, e.program, e.inline)

    async def _renew(self, driver: asyncio.Task) -> None:
        """Push the lease deadline every lease/3 while the run is driven; a renewal that finds the lease gone
        cancels the driver (it must stop touching the run)."""
        lease_s = self.engine.lease.total_seconds()
        while True:
            await sleep_for(self.clock, lease_s / 3)
            try:
                ok = await self.engine.store.fetchval("lease_renew", run_id=self.lease.run_id, owner=self.lease.owner,
                                                      grant=self.lease.grant,
                                                      deadline=self.clock.now() + self.engine.lease)
            except A44Error as exc:
                log.warning("lease renewal of %s failed: %s", self.lease.run_id, exc)
                continue
            if ok is None:
                self.lost = True
                driver.cancel()
                return
