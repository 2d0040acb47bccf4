"""`Env`: the production engine in this process, on a fresh database, on virtual time.

An Env owns an event loop, a `VirtualClock`, a Store on its own migrated database, an `Automation` (the app layer:
publish, run, runs), the scheduler, and one or more workers (`Engine`s: the interpreter `serve` runs, with the
kit's `MockRegistry`). Nothing waits on the wall clock: `advance("3d")` moves the clock to each instant at which
something is due, in order, and settles there; `run_until_idle()` keeps jumping until nothing is due or a run
waits on the outside world.

Settling drives until nothing is runnable at the current virtual instant: the scheduler ticks (its firings
become runs), every live worker claims and drives what is due (runs pending, retries and sleeps come due, leases
of killed workers expired), again until a round claims nothing. What is due next comes from the store's own view
(`lease_next_due`: the earliest next_wake_at, lease deadlines included; the scheduler's next firing and queued
expiry; the earliest due debounce / batch buffer) and from `clock.next_alarm()` (a loop waiting on the clock).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..clock import VirtualClock
from ..durations import parse_duration
from ..runtime.buffers.flusher import BufferFlusher
from ..runtime.engine import Engine
from ..runtime.engine.invoke import AFTER_EFFECT
from ..runtime.logs.retention import ARCHIVE_MONTHS, HOT_DAYS
from ..runtime.scheduling import Scheduler
from ..runtime.store.core import TERMINAL_RUN_STATES, Store
from ..settings import Settings
from .databases import TestPostgres
from .faults import Faults
from .housekeeping import Housekeeping
from .mocks import Mock, MockRegistry

DEFAULT_START = datetime(2026, 7, 19, 14, 2, 11, tzinfo=UTC)
NEVER = timedelta(days=3650)           # the scheduler's poll: the kit asks it for its next firing instead
# what a run that nothing will wake (no next_wake_at) waits on, by state
OUTSIDE = {"awaiting_confirmation": "a person's confirmation of an interrupted exclusive step "
                                    "(a44 automation runs resolve)",
           "blocked_version": "a person: its code contradicts its history (a44 automation runs migrate, or "
                              "runs cancel; docs/verify.md)"}


def instant(text: str | datetime) -> datetime:
    """An ISO instant (`Z` accepted) as an aware UTC datetime."""
    from ..runtime.scheduling.preview import parse_bound

    got = text if isinstance(text, datetime) else parse_bound(str(text), "UTC")
    return (got if got.tzinfo is not None else got.replace(tzinfo=UTC)).astimezone(UTC)


def duration(text: str | timedelta | float) -> timedelta:
    if isinstance(text, timedelta):
        return text
    if isinstance(text, int | float):
        return timedelta(seconds=text)
    return parse_duration(text)


@dataclass
class Waiting:
    """A run that is not finished and that no clock will move: what it waits on."""
    run_id: str
    workflow_id: str
    state: str
    step: str | None
    on: str

    def __str__(self) -> str:
        return f"{self.run_id} ({self.workflow_id}) is {self.state}" + (f" at {self.step}" if self.step else "") + \
            f": waits on {self.on}"


@dataclass
class Idle:
    """How `run_until_idle` stopped: `idle` (nothing due any more), `waiting` (runs wait on the outside world,
    listed in `waiting`) or `limit` (`max_virtual` passed with work still due at `next_due`)."""
    reason: str
    now: datetime
    waiting: list[Waiting] = field(default_factory=list)
    next_due: datetime | None = None

    def __str__(self) -> str:
        lines = [f"{self.reason} at {self.now.isoformat()}"]
        lines += [f"  {w}" for w in self.waiting]
        if self.next_due is not None:
            lines.append(f"  next due at {self.next_due.isoformat()}")
        return "\n".join(lines)


class RunView:
    """A run as the store has it now: state, result, error, its steps' attempts with their virtual instants."""

    def __init__(self, env: Env, run_id: str):
        self.env, self.id = env, run_id

    @property
    def row(self) -> dict:
        return self.env.call(self.env.store.get_run(self.id))

    @property
    def state(self) -> str:
        return self.row["state"]

    @property
    def result(self) -> Any:
        return self.row.get("result")

    @property
    def error_code(self) -> str | None:
        return self.row.get("error_code")

    def attempts(self, step: str | None = None, kind: str | None = "action") -> list[dict]:
        """Every attempt (oldest first): step_id, kind, attempt, status, error_code, started_at, finished_at,
        retry_at, result."""
        rows = self.env.call(self.env.store.list_attempts(self.id))
        return [dict(r) for r in rows if (step is None or r["step_id"] == step) and (kind is None or r["kind"] == kind)]

    @property
    def steps(self) -> dict[str, str]:
        """Each step's latest status."""
        out: dict[str, str] = {}
        for a in self.attempts(kind=None):
            out[a["step_id"]] = a["status"]
        return out

    def __repr__(self) -> str:
        return f"<run {self.id} {self.state}>"


class Env:
    """See the module docstring. Use it through the `a44_env` fixture, or as a context manager."""

    def __init__(self, control_url: str, *, app_database_url: str | None = None, tmp: Path,
                 project: str = "pj_default", start: datetime | str | None = None, seed: int = 7,
                 lease: str | timedelta = "30s", postgres: TestPostgres | None = None,
                 public_url: str | None = None, log_hot_days: int | None = None,
                 log_archive_months: int | None = None):
        from ..app.automation import Automation

        self.loop = asyncio.new_event_loop()
        self.clock = VirtualClock(instant(start) if start is not None else DEFAULT_START)
        self.project = project
        self.postgres = postgres
        self.lease = duration(lease)
        self._rng = random.Random(seed)
        self._tmp = tmp
        self._app_database_url = app_database_url
        self._public_url = public_url        # A44_PUBLIC_URL of the workers (approval links under it)
        self._published = 0
        self.store: Store = self.call(Store.connect(control_url, clock=self.clock, results_dir=tmp / "results",
                                                    max_size=8, session_url=getattr(postgres, "session_url", None)))
        self.call(self.store.ensure_partitions())
        self._partitions_month = (self.clock.now().year, self.clock.now().month)
        self.app = Automation(self.store, project)
        self.registry = MockRegistry(secrets={})
        self.faults = Faults(self)
        self.scheduler = Scheduler(self.store, clock=self.clock, poll=NEVER)
        self.buffers = BufferFlusher(self.store, clock=self.clock)
        self.workers: list[Engine] = []
        self.start_worker()
        # the daemon's other loops (alert rounds, the outbox, retention) at their due instants: housekeeping.py
        self.housekeeping = Housekeeping(self.store, self.clock, secrets=self.registry.secrets,
                                         rng=random.Random(seed), archive_root=tmp / "log-archive",
                                         hot_days=log_hot_days or HOT_DAYS,
                                         archive_months=log_archive_months or ARCHIVE_MONTHS)

    # --- the loop ---------------------------------------------------------------------------------------------
    def call(self, coro):
        """Run a coroutine on the Env's loop (tests are synchronous; the engine is not)."""
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        workers = [*self.workers, *self.faults.retired]
        for w in workers:
            self.call(w.notifier.drain())
        self.call(self.housekeeping.close())
        self.call(self.registry.aclose())
        self.call(self.app.close())          # its run listener; the store is the Env's
        for w in workers:
            self.call(w.app_db.aclose())
        self.call(self.store.close(timeout=30))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- workers ----------------------------------------------------------------------------------------------
    def start_worker(self, worker_id: str | None = None) -> Engine:
        """Another daemon's engine on the same store and clock (`w1`, `w2`, ...)."""
        return self.call(self.new_worker(worker_id))

    async def new_worker(self, worker_id: str | None = None) -> Engine:
        from ..runtime.engine.app_sql import open_app_database
        from ..runtime.engine.daemon import WorkerSettings

        settings = WorkerSettings(database_url=self.store.url, app_database_url=self._app_database_url)
        app_db = await open_app_database(self.store, settings, own_store=False)
        wid = worker_id or f"w{len(self.workers) + 1}"
        engine = Engine(self.store, self.registry, worker_id=wid, lease=self.lease, clock=self.clock,
                        rng=random.Random(self._rng.random()), app_db=app_db,
                        settings=Settings(public_url=self._public_url),
                        services={AFTER_EFFECT: self.faults.after_effect})
        self.workers.append(engine)
        return engine

    # --- publishing and runs ----------------------------------------------------------------------------------
    def publish(self, *sources: str | Path):
        """Publish files, or YAML texts (anything with a newline): the PublishReport; raises when refused. A
        plugin mocked before (`mock("connector/x", ...)`) counts as installed."""
        from ..app.publishing import publish

        paths = []
        for s in sources:
            if isinstance(s, str) and "\n" in s:
                self._published += 1
                p = self._tmp / "published" / f"source_{self._published}.yaml"
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(s)
                s = p
            paths.append(str(s))
        report = self.call(publish(self.store, self.project, paths, plugins=self.registry.mocked_plugins()))
        if not report.ok:
            problems = [f"{d.file}:{d.line}: {d.code} {d.message}" for d in report.diagnostics] + [f"{w.workflow_id}: {w.error}" for w in report.workflows
                                                               if w.error is not None]
            raise AssertionError("publish refused:\n" + "\n".join(problems))
        return report

    def run(self, workflow: str, input: Any = None, *, idempotency_key: str | None = None,
            settle: bool = True, initiator: str | None = None) -> RunView:
        """Start a run (the key defaults to a fresh one per call) and, unless `settle=False`, drive it as far as
        it goes at the current virtual instant. `initiator`: who started it (an approval refuses them)."""
        key = idempotency_key or f"kit-{self._rng.getrandbits(64):016x}"
        handle = self.call(self.app.run(workflow, input, key, initiator=initiator))
        if settle:
            self.settle()
        return RunView(self, handle.run_id)

    def approve(self, run: RunView | str, step: str, person: str, decision: str = "approve", *,
                comment: str | None = None, settle: bool = True) -> dict:
        """`person` decides on the approval step `step` (docs/approvals.md), then the run is driven on."""
        run_id = run if isinstance(run, str) else run.id
        done = self.call(self.app.approve(run_id, step, decision, person=person, via="cli", comment=comment))
        if settle:
            self.settle()
        return done

    def notifications(self) -> list[dict]:
        """The project's notification outbox, oldest first (approval requests, reminders, alerts...)."""
        from ..runtime.notify import outbox

        return list(reversed(self.call(outbox.listing(self.store, self.project, None, 1000))))

    def get(self, run_id: str) -> RunView:
        return RunView(self, run_id)

    def runs(self, workflow: str | None = None) -> list[RunView]:
        """The project's runs (of `workflow`), oldest first."""
        return [RunView(self, r["run_id"]) for r in reversed(self._run_rows(workflow))]

    def _run_rows(self, workflow: str | None = None) -> list[dict]:
        from ..app.automation import workflow_ref

        wid = workflow_ref(workflow) if workflow is not None else None
        return self.call(self.store.list_runs(self.project, workflow=wid, limit=100_000)).runs

    def publish_event(self, type: str, data: Any, idempotency_key: str, *, partition_key: str | None = None,
                      settle: bool = True):
        """An event on the bus (§8), as `a44 automation events publish` sends it: the runs of the triggers it
        matches; returns the PublishResult (event_id, created, deliveries)."""
        from ..app.ingestion import Ingestion

        got = self.call(Ingestion(self.app).publish_event(type, data, idempotency_key, partition_key=partition_key))
        if settle:
            self.settle()
        return got

    # --- mocks ------------------------------------------------------------------------------------------------
    def mock(self, uses: str, *script, step: str | None = None) -> Mock:
        """Answer `uses` from `script` (Ok / Fail, one per call of each step, the last repeating); with `step`,
        that step's own script."""
        return self.registry.mock(uses, *script, step=step)

    def replay_history(self, history: dict, *, idempotency_key: str | None = None) -> RunView:
        """Run again, under mocks answering as the far side did, a history of `runs export` (histories.py)."""
        from .histories import replay

        return replay(self, history, idempotency_key=idempotency_key)

    # --- time -------------------------------------------------------------------------------------------------
    @property
    def now(self) -> datetime:
        return self.clock.now()

    def settle(self, max_rounds: int = 10_000) -> None:
        """Drive until nothing is runnable at the current virtual instant."""
        self.call(self._settle(max_rounds))

    async def _settle(self, max_rounds: int) -> None:
        month = (self.clock.now().year, self.clock.now().month)
        if month != self._partitions_month:     # the daemon does it daily; here the clock jumps months at once
            await self.store.ensure_partitions()
            self._partitions_month = month
        for _ in range(max_rounds):
            report = await self.scheduler.tick()
            flushed = await self.buffers.tick()      # debounce / batch buffers due now become runs
            # the live workers claim side by side, as daemons on one database do (SKIP LOCKED sorts them out)
            rounds = await asyncio.gather(*(w.run_once() for w in self.workers if w not in self.faults.dead))
            claimed = sum(len(r) for r in rounds)
            if await self.faults.replace_dead():
                continue        # a worker died this round: its replacement claims what becomes due
            if claimed or report.runs_created or flushed:
                self.housekeeping.changed()
                continue
            if not await self.housekeeping.tick():     # alerts, notifications, retention due now
                return
        raise RuntimeError(f"runs were still runnable at {self.clock.now().isoformat()} after {max_rounds} rounds")

    async def _next_due(self) -> datetime | None:
        candidates = [await self.store.fetchval("lease_next_due"), self.clock.next_alarm(),
                      await self.scheduler.next_wake(),     # None: no schedule fires and nothing expires
                      await self.buffers.next_wake(),       # None: no debounce / batch buffer is open
                      await self.housekeeping.work_due()]   # a notification's attempt, an active alert round
        return min((c for c in candidates if c is not None), default=None)

    def next_due(self) -> datetime | None:
        """The earliest instant at which something is due (None: nothing ever will be)."""
        return self.call(self._next_due())

    def _stop_at(self, bound: datetime | None) -> datetime | None:
        """Where to stop next on the way to `bound` (the next work, or advance's target): the next work itself,
        or a housekeeping instant before it (a retention round, the alert rounds covering its windows)."""
        nxt = self.next_due()
        edge = nxt if nxt is not None and (bound is None or nxt <= bound) else bound
        if edge is None:
            return None
        side = self.call(self.housekeeping.stop_before(edge))
        return min(side, nxt) if side is not None and nxt is not None else side if side is not None else nxt

    STALL_ROUNDS = 1000     # stops at one instant that does not move: something is due that no round takes

    def _stalled(self, seen: list, nxt: datetime) -> None:
        """Raise instead of looping forever when the stops come back to the same instant, not later than now,
        STALL_ROUNDS times running: work the store calls due that no round of the kit takes (a bug to report)."""
        if seen and seen[0] == nxt and nxt <= self.clock.now():
            seen[1] += 1
            if seen[1] >= self.STALL_ROUNDS:
                raise RuntimeError(f"the kit is stuck at {nxt.isoformat()}: something is due there that no round "
                                   f"takes ({self.STALL_ROUNDS} rounds); waiting runs: {self.waiting()}")
        else:
            seen[:] = [nxt, 0]

    def advance(self, by: str | timedelta | float) -> datetime:
        """Move virtual time forward by `by`, stopping at each instant something is due on the way (in order) to
        settle there; returns the new instant."""
        target = self.clock.now() + duration(by)
        self.settle()
        seen: list = []
        while True:
            nxt = self._stop_at(target)
            if nxt is None or nxt > target:
                break
            self._stalled(seen, nxt)
            self.clock.set(max(nxt, self.clock.now()))
            self.settle()
        self.clock.set(target)
        self.settle()
        return target

    def run_until_idle(self, max_virtual: str | timedelta = "400d") -> Idle:
        """Jump from due instant to due instant until nothing is due (`idle`), until every unfinished run waits
        on the outside world (`waiting`), or until `max_virtual` of virtual time has passed (`limit`)."""
        limit = self.clock.now() + duration(max_virtual)
        self.settle()
        seen: list = []
        while True:
            waiting = self.waiting()
            work = self.next_due()
            if work is None:
                return Idle("waiting" if waiting else "idle", self.clock.now(), waiting)
            if work > limit:
                self._through(limit)
                return Idle("limit", self.clock.now(), self.waiting(), self.next_due())
            nxt = self._stop_at(work)
            self._stalled(seen, nxt or work)
            self.clock.set(max(nxt or work, self.clock.now()))
            self.settle()

    def _through(self, target: datetime) -> None:
        """To `target`, stopping at the housekeeping instants on the way."""
        while (side := self.call(self.housekeeping.stop_before(target))) is not None and side < target:
            self.clock.set(max(side, self.clock.now()))
            self.settle()
        self.clock.set(target)
        self.settle()

    def waiting(self) -> list[Waiting]:
        """Unfinished runs that no clock moves (nothing is due for them), and what each waits on."""
        out = []
        for r in self._run_rows():
            if r["state"] in TERMINAL_RUN_STATES or r["next_wake_at"] is not None:
                continue
            on = OUTSIDE.get(r["state"], f"something from outside (nothing is due for it in state {r['state']})")
            out.append(Waiting(r["run_id"], r["workflow_id"], r["state"], r["current_step"], on))
        return out

    # --- faults (faults.py) -----------------------------------------------------------------------------------
    def kill_worker(self, at: str = "after_effect_before_record", step: str | None = None, *,
                    times: int | None = 1) -> None:
        """Arm a crash: see Faults.kill_worker."""
        self.faults.kill_worker(at, step, times=times)

    def expire_lease(self, run: RunView | str) -> None:
        """Take the run's lease away from its holder now (its holder's next write is refused)."""
        self.faults.expire_lease(run if isinstance(run, str) else run.id)

    def deliver_twice(self, type: str, data: Any, idempotency_key: str, *, partition_key: str | None = None):
        """The same event delivered twice (an at-least-once bus): both PublishResults."""
        first = self.publish_event(type, data, idempotency_key, partition_key=partition_key)
        return first, self.publish_event(type, data, idempotency_key, partition_key=partition_key)

    def restart_postgres(self) -> None:
        self.faults.restart_postgres()
