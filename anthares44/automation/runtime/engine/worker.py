"""The engine: claims due runs under leases and drives each with a `RunDriver` (interpreter.py).

`Engine` is the in-process API the daemon loops over and tests call directly: `claim()`, `run_once()` (claim a
batch, drive each run until it ends or releases), `drive()` (repeat until nothing is due). It owns what drivers
share: the store, the connector registry, the clock, the jitter RNG, the IR and CEL caches, and the counters.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import secrets
import socket
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from ...clock import Clock
from ...compiler.ir import NodeIR, WorkflowIR, load_workflow_ir
from ...errors import A44Error
from ...settings import Settings
from ...stdlib_connectors.registry import ConnectorRegistry
from ...stdlib_connectors.sql_database import AppDatabase
from ...tracing import Tracer
from ..approvals import links as approval_links
from ..connector_services import connector_services
from ..secrets.file import SecretFile
from ..secrets.source import SecretSource
from ..store.core import TERMINAL_RUN_STATES, Store
from .committer import Committer, synchronous_commit
from .flow_keys import FlowKeyer
from .interpreter import RunDriver
from .journal import Lease, Notifier
from .timer_firing import BATCH, fire_due

log = logging.getLogger("a44.engine")


def correlation(run_id: str, step_id: str | None = None, attempt: int | None = None) -> dict:
    """The `extra=` of a log line about a run: the fields `--log-format json` prints beside the message."""
    return {k: v for k, v in (("run_id", run_id), ("step_id", step_id), ("attempt", attempt)) if v is not None}
DEFAULT_LEASE = timedelta(seconds=30)
UPGRADE_EVERY = timedelta(seconds=5)   # auto-upgrade sweep of released runs (runtime/upgrades.py)
# a run parked behind an unfinished run of its partition is promoted when that run finishes (trigger of 0007);
# it is also looked at again after this long, in case a claim parked it while its predecessor was finishing
PARK_RECHECK = timedelta(seconds=60)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(2)}"


class Engine:
    def __init__(self, store: Store, registry: ConnectorRegistry | None = None, *, worker_id: str | None = None,
                 lease: timedelta = DEFAULT_LEASE, clock: Clock | None = None, rng: random.Random | None = None,
                 concurrency: int = 16, services: dict[str, Any] | None = None, app_db: Any = None,
                 settings: Settings | None = None, tracer: Tracer | None = None, group_commit: bool = True):
        self.store = store
        self._upgraded_at: datetime | None = None    # the last auto-upgrade sweep (upgrade_released)
        settings = settings if settings is not None else Settings()   # what the edge read: the a44 home, keys
        self.tracer = tracer       # None: no spans, nothing done per attempt (tracing.from_environment)
        self.registry = registry if registry is not None else ConnectorRegistry()
        if self.registry.secrets is None:   # the deployment's: environment, then <home>/secrets.json
            self.registry.secrets = SecretSource(file=SecretFile.of(settings))
        if self.registry.storage is None:   # storage/* and results over 256 KB share one object store
            self.registry.storage = store.results.storage
        self.worker_id = worker_id or default_worker_id()
        self.lease = lease
        self.clock = clock or store.clock
        self.rng = rng or random.Random()
        self.concurrency = concurrency
        # what connectors share (stdlib_connectors/services.py): sql/execute runs on its project's application
        # database (`app_db`, an AppDatabase; None: none configured, such steps fail with E_SQL_NO_DATABASE) unless a
        # step names a DSN; queue/publish publishes through the bus of this store, breakers keep their state in it
        self.app_db = app_db if app_db is not None else AppDatabase(None)
        self.services = {**connector_services(store, self.app_db, settings=settings, clock=clock),
                         approval_links.PUBLIC_URL: settings.public_url, **(services or {})}
        self.stopping = False
        self.metrics: Counter[str] = Counter()
        self._irs: dict[tuple[str, str, int], WorkflowIR] = {}
        self._programs: dict[int, Any] = {}
        self._inline: dict[int, bool] = {}
        self.notifier = Notifier(store)     # NOTIFYs of step transactions, sent after commit (journal.py)
        # step transitions of all runs ready at once commit as one statement (committer.py); without group commit
        # (bench/bench_group_commit.py compares) each transition is its own statement
        self.committer = Committer(store, synchronous_commit=synchronous_commit(settings)) if group_commit else None
        self._ir_lock = asyncio.Lock()
        self.drivers: dict[str, RunDriver] = {}     # the runs being driven, for a cancel request (cancels.py)
        self._cancel_soon: set[str] = set()         # leased to us, cancel requested, driver not started yet
        self._settles: set[asyncio.Task] = set()
        self.flow = FlowKeyer(self)                 # computes new runs' flow keys before their admission (§22)

    # --- shared caches ----------------------------------------------------------------------------------------
    async def workflow_ir(self, project: str, workflow_id: str, version: int) -> WorkflowIR:
        """Published IR never changes (§3.8), so it is cached for the life of the engine."""
        key = (project, workflow_id, version)
        ir = self._irs.get(key)
        if ir is None:
            async with self._ir_lock:     # one read per version, even when a batch of its runs starts at once
                ir = self._irs.get(key)
                if ir is None:
                    row = await self.store.get_version(project, workflow_id, version)
                    ir = self._irs[key] = load_workflow_ir(row["ir"])
        return ir

    def program(self, node: NodeIR | None, expr=None):
        """The loaded CEL program of `expr` (default: the node's `if:`), cached per IR object."""
        from ...grammar import load_program

        if expr is None:                # no node only with an expr (the keyer's flow keys)
            assert node is not None
            expr = node.condition
        prog = self._programs.get(id(expr))
        if prog is None:
            prog = self._programs[id(expr)] = load_program(expr.program)
        return prog

    def inline(self, node: NodeIR) -> bool:
        """True for a step whose connector has no external effect (the built-in `pass`): the interpreter runs it
        on the spot and writes its attempt once, already finished, in the transaction of the transition that
        made it ready (docs/runtime.md). A step with an effect always gets its `running` row first."""
        got = self._inline.get(id(node))
        if got is None:
            from ...stdlib_connectors.pass_ import PassConnector

            try:
                got = node.kind == "call" and node.connector is not None and \
                    type(self.registry.get(node.connector)) is PassConnector
            except Exception:  # noqa: BLE001 - unknown connector: the normal path reports it as the step's error
                got = False
            self._inline[id(node)] = got
        return got

    # --- leases -----------------------------------------------------------------------------------------------
    async def claim(self, limit: int | None = None) -> list:
        """Grant up to `limit` due runs to this worker (FOR UPDATE SKIP LOCKED: daemons never get the same run)."""
        await self.flow.key_new()       # runs with flow limits are claimable once their keys are known (0039)
        now = self.clock.now()
        # one statement (0022): the advisory lock serialising claims of every daemon, then the claim in a fresh
        # snapshot, so the slots a queue / workflow has in use count every earlier grant (docs/queues.md)
        rows = await self.store.fetch("lease_claim", worker_id=self.worker_id, now=now, limit=limit or self.concurrency,
                                      lease=self.lease, park_until=now + PARK_RECHECK)
        # the claim's run.state events are not notified on their own (0006): the visit's first commit, which
        # follows at once, notifies the run
        for r in rows:
            self.metrics["runs_claimed"] += 1
            if r["prev_owner"] is not None:
                self.metrics["lease_reclaim_total"] += 1
                self.event("lease.reclaimed", r["run_id"], previous_owner=r["prev_owner"], level=logging.WARNING)
            if r["prev_state"] != r["state"]:
                self.event(f"run.{r['state']}", r["run_id"], previous=r["prev_state"])
        return rows

    async def fire_timers(self, limit: int = BATCH) -> int:
        """Fire up to `limit` due sleeps of runs no worker holds, in one statement (timer_firing.py): the cheap
        way at volume; a held run's sleep is fired by its visit. Returns how many fired."""
        n = await fire_due(self.store, self.clock.now(), limit)
        self.metrics["timers_fired_total"] += n
        return n

    async def expire_queued(self, limit: int = 500) -> int:
        """§10.3 maxAge: runs waiting in a queue (never started) longer than its deadLetter.maxAge are cancelled
        with E_EVENT_TOO_OLD and dead-lettered. Returns how many."""
        n = await self.store.fetchval("queue_expire_waiting", now=self.clock.now(), limit=limit)
        if n:
            self.metrics["queue_expired_total"] += n
        await self.flow.sweep()
        return n or 0

    async def release(self, lease: Lease) -> None:
        """Hand a run back unfinished (shutdown): due again now, for any worker."""
        await self.store.fetchval("lease_release", run_id=lease.run_id, owner=lease.owner, grant=lease.grant,
                                  now=self.clock.now())
        self.event("lease.released", lease.run_id)

    # --- driving ----------------------------------------------------------------------------------------------
    async def drive_run(self, row) -> str:
        """Drive one claimed run; never raises for a run's trouble (the lease expires and the run is retried)."""
        run_id = row["run_id"]
        driver = None
        try:
            ir = await self.workflow_ir(row["project_id"], row["workflow_id"], row["version"])
            driver = self.drivers[run_id] = RunDriver(self, row, ir)
            if run_id in self._cancel_soon:
                self._cancel_soon.discard(run_id)
                driver.cancel.ask()
            outcome = await driver.drive()
            if driver.cancel.asked and outcome not in TERMINAL_RUN_STATES:
                # the visit released the run (a wait, a park) as the request came in: no worker holds it now
                await self._settle_cancel(run_id)
            return outcome
        except A44Error as exc:
            self.metrics["visit_errors"] += 1
            log.warning("run %s: visit aborted by %s; it resumes when its lease expires", row["run_id"], exc,
                        extra=correlation(row["run_id"]))
            return "error"
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a bug in one run must not stop the worker
            self.metrics["visit_errors"] += 1
            log.exception("run %s: visit failed; it resumes when its lease expires", row["run_id"],
                          extra=correlation(row["run_id"]))
            return "error"
        finally:
            if driver is not None and self.drivers.get(run_id) is driver:
                del self.drivers[run_id]

    # --- cancel requests (cancels.py) -------------------------------------------------------------------------
    def cancel_requested(self, run_id: str) -> None:
        """A person asked to cancel `run_id` (NOTIFY a44_run_cancel): the driver of the run stops at its next
        safe point; a run this engine does not drive is settled in case its holder just let it go."""
        driver = self.drivers.get(run_id)
        if driver is not None:
            driver.cancel.ask()
            return
        task = asyncio.get_running_loop().create_task(self._settle_cancel(run_id))
        self._settles.add(task)
        task.add_done_callback(self._settles.discard)

    async def _settle_cancel(self, run_id: str) -> None:
        try:
            row = await self.store.fetchrow("run_cancel_settle", run_id=run_id, now=self.clock.now())
        except A44Error as exc:     # the request stays on the run: the next worker to claim it carries it out
            log.info("cancel of %s: %s", run_id, exc)
            return
        if row["outcome"] == "cancelled":
            self.event("run.cancelled", run_id)
        elif row["outcome"] == "requested" and row["lease_owner"] == self.worker_id:
            driver = self.drivers.get(run_id)
            if driver is not None:
                driver.cancel.ask()
            else:                   # claimed by us, its driver not started yet
                self._cancel_soon.add(run_id)

    async def upgrade_released(self) -> int:
        """`versioning: auto-upgrade` runs a worker held at the publish move when released (runtime/upgrades.py),
        at most once per UPGRADE_EVERY of the engine's clock. Returns how many moved."""
        from ..upgrades import sweep

        now = self.clock.now()
        if self._upgraded_at is not None and now - self._upgraded_at < UPGRADE_EVERY:
            return 0
        self._upgraded_at = now
        return await sweep(self.store, now)

    async def run_once(self, limit: int | None = None) -> dict[str, str]:
        """Claim one batch of due runs and drive them concurrently to the end of this visit.
        Returns {run_id: how the visit ended}. Due timers of released runs fire first, in sets; released runs of
        auto-upgrade workflows move to their newest version before the claim."""
        await self.fire_timers()
        await self.upgrade_released()
        rows = await self.claim(limit)
        outcomes = await asyncio.gather(*(self.drive_run(r) for r in rows))
        await self.notifier.drain()
        return {r["run_id"]: o for r, o in zip(rows, outcomes)}

    async def drive(self, max_rounds: int = 1000) -> dict[str, str]:
        """`run_once` until nothing is due at the clock's current instant (tests: advance the clock, drive again).
        Returns the last outcome of every run visited."""
        seen: dict[str, str] = {}
        for _ in range(max_rounds):
            got = await self.run_once()
            if not got:
                return seen
            seen.update(got)
        raise RuntimeError(f"runs were still due after {max_rounds} rounds")

    # --- observability ----------------------------------------------------------------------------------------
    def event(self, what: str, run_id: str, *, level: int = logging.INFO, **fields) -> None:
        """One structured line per state change: `what run=... key=value ...` (stderr via the daemon's handler)."""
        self.metrics[what] += 1
        if log.isEnabledFor(level):
            extra = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
            log.log(level, "%s run=%s worker=%s%s", what, run_id, self.worker_id, f" {extra}" if extra else "",
                    extra=correlation(run_id, fields.get("step"), fields.get("attempt")))
