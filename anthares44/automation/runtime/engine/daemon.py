"""The interpreter daemon: `WorkerSettings` and `Daemon` (app/serve.py composes it with the scheduler and the
HTTP plane into `a44 automation serve`).

The daemon migrates the schema and creates partitions at start, then loops: claim as many due runs as it has
free slots (`concurrency` runs in flight), drive each in its own task, and sleep until something can be due:
a NOTIFY on channel `a44_runs_due` (a run created or released, migration 0002), a driver finishing (a slot
frees), or the engine clock reaching the earliest `next_wake_at` (a retry, a sleep, or a lease deadline of a
worker that may have died: an alarm of the injected Clock, so a VirtualClock drives the loop), with a re-check
after the lease timeout of wall time in case a NOTIFY was missed. No busy polling. Several daemons share one
database: claims use FOR UPDATE SKIP LOCKED.

A NOTIFY on channel `a44_run_cancel` (a person cancelled the run it names, runtime/engine/cancels.py) goes to
the engine, whose driver of that run stops at its next safe point.

Shutdown (`request_stop`, SIGTERM/SIGINT in the CLI): stop claiming, let in-flight steps finish and be recorded
for up to `grace`, release every lease (the run is due again at once for another daemon), exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ... import tracing
from ...clock import Clock, SystemClock, sleep_for, wait_event
from ...durations import parse_duration, reconnect_delay
from ...errors import A44Error
from ...paths import storage_root
from ...settings import Settings
from ...stdlib_connectors.registry import ConnectorRegistry
from ..outage import OUTAGE
from ..store.core import Store
from ..store.migrate import log_migrated as migrated
from . import heartbeat, warmup
from .app_sql import describe as describe_app_database
from .app_sql import open_app_database
from .committer import synchronous_commit
from .journal import Lease
from .timer_firing import TimerFiring
from .worker import DEFAULT_LEASE, Engine, default_worker_id

log = logging.getLogger("a44.daemon")
lifecycle = logging.getLogger("a44.lifecycle")     # started, migrated, listening, stopped: shown by a default serve
NOTIFY_CHANNEL = "a44_runs_due"
CANCEL_CHANNEL = "a44_run_cancel"      # a person asked to cancel the run named by the payload (migration 0020)
PARTITIONS_EVERY = timedelta(hours=24)
EXPIRE_EVERY = timedelta(seconds=1)    # queue deadLetter.maxAge sweep (docs/queues.md)
POOL_MAX = 16                  # connections of a daemon pool unless WorkerSettings.pool_size says otherwise


def _duration(text: str | None, default: timedelta) -> timedelta:
    if not text:
        return default
    return parse_duration(text)


@dataclass
class WorkerSettings:
    database_url: str | None = None            # None: the embedded server of `env`
    # where workflow SQL runs (sql/execute without a connection): a URL with {project}; None: the embedded server's
    # database per project when the control store is the embedded one, else none (docs/store.md)
    app_database_url: str | None = None
    worker_id: str = field(default_factory=default_worker_id)
    lease_timeout: timedelta = DEFAULT_LEASE   # §18: p99 of the slowest step + 50 %
    concurrency: int = 16                      # runs in flight in this daemon
    grace: timedelta = timedelta(seconds=10)   # how long in-flight steps may finish at shutdown
    claim_batch: int = 64                      # most runs granted per claim statement
    pool_size: int | None = None               # connections; None: min(concurrency + 3, POOL_MAX)
    schedules: bool = True                     # app.serve() runs the scheduler beside it (§11, docs/schedules.md)
    env: Settings = field(default_factory=Settings)   # the environment the edge read: where the embedded server is

    @classmethod
    def from_settings(cls, settings, **overrides) -> WorkerSettings:
        """From the databases, lease timeout, worker id and concurrency of `settings` (settings.Settings, the
        environment), then `overrides` (not None)."""
        s = cls(lease_timeout=_duration(settings.lease_timeout, DEFAULT_LEASE), database_url=settings.database_url,
                app_database_url=settings.app_database_url, env=settings)
        if settings.worker_id:
            s.worker_id = settings.worker_id
        if settings.concurrency is not None:
            s.concurrency = settings.concurrency
        for k, v in overrides.items():
            if v is not None:
                setattr(s, k, v)
        if s.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if s.lease_timeout < timedelta(milliseconds=300):
            raise ValueError("the lease timeout must be at least 300ms")
        synchronous_commit(settings)     # a bad A44_SYNCHRONOUS_COMMIT stops `serve` before it connects
        return s


class Daemon:
    def __init__(self, settings: WorkerSettings, *, store: Store | None = None,
                 registry: ConnectorRegistry | None = None, clock: Clock | None = None,
                 rng: random.Random | None = None):
        self.settings = settings
        self._store = store
        self._own_store = store is None
        self._registry = registry
        self._clock = clock
        self._rng = rng
        self.engine: Engine | None = None
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._active: dict[asyncio.Task, object] = {}
        self._alarm: tuple[datetime, asyncio.Future[None]] | None = None   # the earliest NOTIFYed due instant
        # something may have become due that the last claim did not see: a NOTIFY, a timer, a failed or skipped
        # claim. A driver finishing alone is no such hint when nothing due was left behind (see _loop)
        self._hinted = True
        self._next_due: datetime | None = None  # the earliest due instant the last check found
        self._due_left = True                   # that check found runs due now that no claim took
        self._firing: TimerFiring | None = None   # the timer task, which a claim yields to while timers are overdue

    @property
    def store(self) -> Store:
        assert self._store is not None, "start() first"
        return self._store

    def request_stop(self) -> None:
        """Stop claiming and shut down gracefully (safe to call from a signal handler)."""
        self._stop.set()
        self._wake.set()

    # --- lifecycle ----------------------------------------------------------------------------------------------
    def _engine(self) -> Engine:
        assert self.engine is not None, "the loops run only after start()"   # for the checker: start() sets it
        return self.engine

    async def start(self) -> None:
        s = self.settings
        tracer = tracing.from_environment()     # a bad OTEL_* configuration stops the daemon before it connects
        if self._store is None:
            from ..postgres.database import resolve_url

            url = s.database_url or resolve_url(s.env, start=True)
            # a run holds a connection only while it writes (a step in flight holds none), so the pool stays
            # small whatever --concurrency is: fewer backends to schedule on the server's cores, and never more
            # than its max_connections (100 by default)
            self._store = await Store.connect(url, clock=self._clock or SystemClock(),
                                              max_size=s.pool_size or max(4, min(s.concurrency + 3, POOL_MAX)),
                                              results_dir=storage_root(s.env.home),
                                              session_url=s.env.database_session_url)
        await self._store.check_session()     # LISTEN needs a session: refused through a transaction pooler
        migrated(await self._store.migrate())
        await self._store.ensure_partitions()
        app_db = await open_app_database(self._store, s, own_store=self._own_store)
        self.engine = Engine(self._store, self._registry, worker_id=s.worker_id, lease=s.lease_timeout,
                             clock=self._clock or self._store.clock, rng=self._rng, concurrency=s.concurrency,
                             app_db=app_db, settings=s.env, tracer=tracer)
        await self._warm()
        await self._beat()
        lifecycle.info("serving worker=%s lease=%ss concurrency=%d workflow-sql=%s", s.worker_id,
                       s.lease_timeout.total_seconds(), s.concurrency, describe_app_database(app_db))

    async def _warm(self) -> None:
        """Open the pool's connections and run the hot statements once on each before announcing readiness, so
        the first runs do not pay for connects, prepares and first plans (warmup.py)."""
        try:
            n = await warmup.warm(self.store, self.settings.worker_id, self.store.pool.get_max_size(),
                                  self._engine().clock.now())
            log.debug("warmed %d connection(s)", n)
            warmup.warm_connectors(self._engine().registry, await warmup.used_types(self.store))
        except A44Error as exc:     # only a head start: the runs pay for it themselves
            log.info("warm-up: %s", exc)

    async def serve(self) -> None:
        """start() if needed, then claim and drive runs until request_stop(); then shut down gracefully."""
        if self.engine is None:
            await self.start()
        listener = asyncio.create_task(self._listen())
        beats = asyncio.create_task(self._heartbeats())
        # due timers of released runs fire in sets at their instants, whatever the claim loop's slots (0035)
        firing = self._firing = TimerFiring(self.store, self._engine().clock, self._engine().fire_timers,
                                            lambda n: self._hint())
        timers = asyncio.create_task(firing.run(self._stop))
        try:
            await self._loop()
        finally:
            for task in (listener, beats, timers):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await self._shutdown()

    async def _loop(self) -> None:
        engine, s = self.engine, self.settings
        last_partitions = last_expiry = engine.clock.now()
        failures = 0
        backlog = False     # the last claim came back full: more runs are probably due
        quiet = False       # the last claim was not full and left nothing due behind
        while not self._stop.is_set():
            self._wake.clear()
            hinted, self._hinted = self._hinted, False
            quiet = quiet and not hinted and not backlog
            claimed = 0
            free = s.concurrency - len(self._active)
            # with a backlog, refill by a quarter of the slots at a time instead of one claim per finished run
            # (fewer claim statements and commits per run, docs/runtime.md); when idle, claim at once
            refill = max(1, min(s.concurrency, s.claim_batch) // 4) if backlog else 1
            began = time.monotonic()     # wall: how long an outage lasted, in real seconds (runtime/outage.py)
            try:
                if quiet:
                    # only a driver finished: nothing became due since the last claim took everything that was
                    # (a run created or released, a slot freed for a limited queue, notifies or was due then)
                    wake_at, poll_s = self._until_known_due()
                elif free >= refill:
                    if self._firing is not None:
                        await self._firing.caught_up()
                    asked = min(free, s.claim_batch)
                    rows = await engine.claim(asked)
                    claimed = len(rows)
                    for row in rows:
                        task = asyncio.create_task(engine.drive_run(row))
                        self._active[task] = row["run_id"]
                        task.add_done_callback(self._done)
                    backlog = claimed == asked
                    if backlog and free > claimed:
                        continue        # a full batch and slots left: more may be due right now
                if engine.clock.now() - last_expiry > EXPIRE_EVERY:
                    last_expiry = engine.clock.now()
                    await engine.expire_queued()
                    await self._engine().upgrade_released()     # every UPGRADE_EVERY: auto-upgrade runs held at publish
                if engine.clock.now() - last_partitions > PARTITIONS_EVERY:
                    await self.store.ensure_partitions()
                    last_partitions = engine.clock.now()
                if not quiet and backlog and self._active:  # a finishing run wakes the loop; no need to ask when
                    wake_at, poll_s = None, s.lease_timeout.total_seconds()
                elif not quiet:
                    wake_at, poll_s = await self._until_next_due(claimed, free)
                    # a claim that was not full and nothing due left: the next driver to finish need not claim
                    quiet = not backlog and free >= refill and not self._hinted and not self._due_left
                failures = 0
                OUTAGE.ok(self.store.url, began)
            except A44Error as exc:
                # the database is away (restart, network): keep the in-flight work, retry with a backoff; one
                # line when it goes and one when it is back (runtime/outage.py), not one per retry
                failures += 1
                wake_at, poll_s = None, reconnect_delay(failures)
                self._hinted, quiet = True, False
                if not OUTAGE.failed(self.store.url, "claim", exc):
                    log.debug("claim loop: %s; retrying in %.1fs", exc, poll_s)
            await self._sleep(wake_at, poll_s)

    async def _sleep(self, wake_at: datetime | None, poll_s: float) -> None:
        """Until a wake-up (NOTIFY, a driver finishing, stop), the engine clock reaching `wake_at` (an alarm of
        the injected clock), or `poll_s` seconds of wall time: that re-check (a NOTIFY missed, a claim contended by
        other daemons, the database's return) is paced in real seconds whatever the engine clock says."""
        try:
            async with asyncio.timeout(poll_s):
                if await wait_event(self._engine().clock, self._wake, wake_at):
                    return
        except TimeoutError:
            pass
        self._hinted = True     # the earliest due time (or the re-check) has come

    async def _until_next_due(self, claimed: int, free: int) -> tuple[datetime | None, float]:
        """The earliest next_wake_at to wake at, and the wall-time re-check (the lease timeout); a short floor
        instead when due runs exist but were all locked by other daemons, so a contended claim does not spin."""
        cap = self.settings.lease_timeout.total_seconds()
        self._next_due, self._due_left = None, True
        if free <= 0:
            return None, cap
        due: datetime | None = await self.store.fetchval("lease_next_due")
        self._due_left = False
        if due is None:
            return None, cap
        if due <= self._engine().clock.now():
            self._due_left = True
            return None, 0.05 if claimed == 0 else 0.0
        self._next_due = due
        return due, cap

    def _until_known_due(self) -> tuple[datetime | None, float]:
        """The due instant the last `lease_next_due` found, and the wall-time re-check (the lease timeout)."""
        return self._next_due, self.settings.lease_timeout.total_seconds()

    async def _beat(self) -> None:
        try:
            await heartbeat.beat(self.store, self.settings.worker_id, len(self._active), self._engine().clock.now())
        except A44Error as exc:
            log.info("heartbeat: %s", exc)

    async def _heartbeats(self) -> None:
        """Beat every HEARTBEAT_EVERY of the engine clock (the beats' instants are its instants, and presence is
        judged on it: a VirtualClock moved by a day sees a beat at its new instant, not a daemon gone for a day);
        a task of its own because the loop itself may sleep a whole lease timeout when idle."""
        while True:
            await sleep_for(self._engine().clock, heartbeat.HEARTBEAT_EVERY.total_seconds())
            await self._beat()

    def _done(self, task: asyncio.Task) -> None:
        self._active.pop(task, None)
        self._wake.set()

    def _hint(self) -> None:
        """Something may be due now (a NOTIFY or a timer): the loop claims."""
        self._hinted = True
        self._wake.set()

    async def _listen(self) -> None:
        """Hold a connection LISTENing on a44_runs_due; re-LISTEN after the database comes back."""
        clock = self._engine().clock

        def on_notify(conn, pid, channel, payload):
            try:
                due = datetime.fromtimestamp(int(payload) / 1000, tz=UTC)
            except ValueError:
                self._hint()
                return
            if due <= clock.now():
                self._hint()
                return
            # one alarm, the earliest: once woken the loop asks the database for the next due time anyway, so an
            # alarm per payload (thousands of runs parked in a sleep) would only hold memory
            if self._alarm is not None and not self._alarm[1].done():
                if self._alarm[0] <= due:
                    return
                self._alarm[1].cancel()
            alarm = clock.alarm(due)
            alarm.add_done_callback(lambda f: f.cancelled() or self._hint())
            self._alarm = (due, alarm)

        def on_cancel(conn, pid, channel, payload):
            self._engine().cancel_requested(payload)

        while True:
            try:
                async with self.store.session_connection("listen") as conn:
                    await conn.add_listener(NOTIFY_CHANNEL, on_notify)
                    await conn.add_listener(CANCEL_CHANNEL, on_cancel)
                    try:
                        self._hint()         # something may have become due while we were not listening
                        while not conn.is_closed():
                            await asyncio.sleep(1.0)    # wall: polls the socket's state, not an instant
                    finally:                 # back to the pool without a listener (asyncpg warns otherwise)
                        if not conn.is_closed():
                            with contextlib.suppress(Exception):
                                await conn.remove_listener(NOTIFY_CHANNEL, on_notify)
                                await conn.remove_listener(CANCEL_CHANNEL, on_cancel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the database went away; the claim loop reports it
                log.debug("listener: %s; reconnecting", exc)
            await asyncio.sleep(1.0)    # wall: the pace of reconnecting to a database that went away

    async def _shutdown(self) -> None:
        engine = self.engine
        engine.stopping = True
        if self._alarm is not None:
            self._alarm[1].cancel()
        names = dict(self._active)
        if self._active:
            lifecycle.info("stopping: %d run(s) in flight, waiting up to %ss", len(self._active),
                        self.settings.grace.total_seconds())
            # wall: grace is the real time a supervisor allows between SIGTERM and SIGKILL
            done, pending = await asyncio.wait(list(self._active), timeout=self.settings.grace.total_seconds())
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
                # drivers cut off mid-step leave their attempt `running`; hand the runs back so the next worker
                # decides (retry, or awaiting_confirmation for an exclusive step)
                for t in pending:
                    run_id = names.get(t)
                    if run_id is not None:
                        await self._release_quietly(run_id)
        self._active.clear()
        with contextlib.suppress(Exception):
            await engine.notifier.drain()
        with contextlib.suppress(Exception):
            await engine.registry.aclose()
        with contextlib.suppress(Exception):
            await engine.app_db.aclose()
        if engine.tracer is not None:    # export what is still batched (bounded by OTEL_BSP_EXPORT_TIMEOUT)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(engine.tracer.shutdown)
        with contextlib.suppress(Exception):
            await heartbeat.stopped(self.store, self.settings.worker_id, engine.clock.now())
        if self._own_store and self._store is not None:
            await self._store.close()
        lifecycle.info("stopped worker=%s", self.settings.worker_id)

    async def _release_quietly(self, run_id: str) -> None:
        try:
            run = await self.store.get_run(run_id)
            if run["lease_owner"] == self.settings.worker_id:
                await self._engine().release(Lease(run_id, run["project_id"], run["workflow_id"], run["lease_owner"],
                                                run["lease_grants"], run["epoch"]))
        except A44Error as exc:
            log.warning("could not release %s: %s (its lease expires on its own)", run_id, exc)
