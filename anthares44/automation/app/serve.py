"""`serve()`: one a44 process composed from one `ServeSettings`: the interpreter daemon (runtime/engine), the
scheduler of schedule triggers (runtime/scheduling), the delivery worker of notifications (runtime/notify), the
alert evaluator (runtime/alerts) and the HTTP plane (webhooks, the bus endpoint, the REST API,
`/metrics`). `a44 automation serve` runs all three (HTTP when `--http-port` is given), `a44 automation ingest`
the HTTP plane alone.

The HTTP plane is an edge (`http/`): imports go down only, so the caller hands `serve()` a factory that builds it
(`http.HttpServer`) instead of this module importing it. `HttpSettings` and `HttpLimits` are plain values the edge
reads; nothing here touches aiohttp.

A non-loopback `host` is refused unless `/metrics` requires a token (`metrics_token_required`): the REST API
always requires one and webhooks are signed, but `/metrics` trusts any client whose address is loopback, which
behind a reverse proxy on the same machine is every client (docs/api.md "Listening address").
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import E_HTTP_HOST_UNSAFE, A44Error
from ..settings import Settings

log = logging.getLogger("a44.serve")
DEFAULT_HOST = "127.0.0.1"
HTTP_POOL = 20                 # the HTTP plane's own connections: requests never wait for a worker's


@dataclass(frozen=True)
class HttpLimits:
    """How long and how much the HTTP plane waits for a client (docs/api.md "Limits"; http/limits.py)."""
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 1000
    metrics_token_required: bool = False


@dataclass(frozen=True)
class HttpSettings:
    port: int = 8044
    host: str = DEFAULT_HOST
    pool_size: int = HTTP_POOL
    limits: HttpLimits = field(default_factory=HttpLimits)
    webhook_max_batch: int | None = None       # None: the defaults of docs/webhooks.md "Performance"
    webhook_flushers: int | None = None
    webhook_cache_ttl: float | None = None
    log_archive_dir: str | None = None         # where `GET /v1/automation/logs?archive=true` reads (paths.py)
    settings: object | None = None             # settings.Settings the edge read: secrets, delivery (channels)

    @classmethod
    def from_settings(cls, settings, **values) -> HttpSettings:
        """`values` (flags), with the webhook tuning and the log archive of `settings` (settings.Settings, the
        environment)."""
        from ..paths import log_archive_root

        return cls(webhook_max_batch=settings.webhook_max_batch, webhook_flushers=settings.webhook_flushers,
                   webhook_cache_ttl=settings.webhook_cache_ttl,
                   log_archive_dir=str(log_archive_root(settings.home, settings.log_archive_dir)),
                   settings=settings, **values)

    def tune(self, store) -> None:
        from .gateway import tune_webhooks

        tune_webhooks(store, max_batch=self.webhook_max_batch, flushers=self.webhook_flushers,
                      cache_ttl=self.webhook_cache_ttl)

    def check(self) -> None:
        """E_HTTP_HOST_UNSAFE for a host other clients can reach while /metrics is loopback-only."""
        if not is_loopback_host(self.host) and not self.limits.metrics_token_required:
            raise A44Error(E_HTTP_HOST_UNSAFE,
                           f"--host {self.host or '(all addresses)'} is not a loopback address, and /metrics answers "
                           "any client whose address is loopback (every client, behind a local reverse proxy)",
                           hint="add --metrics-token-required (then /metrics needs an automation:read token), "
                                "or serve on 127.0.0.1 / ::1")


def is_loopback_host(host: str) -> bool:
    """`localhost` or a literal loopback address; another name or a wildcard (`0.0.0.0`, `::`, "") is not."""
    return host == "localhost" or is_loopback(host.strip("[]"))


def is_loopback(address: str | None) -> bool:
    """A literal loopback address (127.0.0.0/8, ::1, with or without a zone); not a name, not None."""
    try:
        return ipaddress.ip_address((address or "").split("%")[0]).is_loopback
    except ValueError:
        return False


class HttpPlane(Protocol):
    store: Any

    @property
    def url(self) -> str: ...

    async def start(self) -> HttpPlane: ...

    async def stop(self) -> None: ...


HttpFactory = Callable[[Any, HttpSettings], HttpPlane]    # (store, settings) -> a server not yet started


@dataclass(frozen=True)
class ServeSettings:
    """What one process serves. `worker` None: the HTTP plane only (`ingest`), on `database_url` (None:
    the embedded server of `env`). `http` None: no HTTP plane."""
    worker: Any = None                 # runtime.engine.WorkerSettings
    http: HttpSettings | None = None
    database_url: str | None = None
    env: Settings = field(default_factory=Settings)     # the environment the edge read
    notify: Any = None                 # runtime.notify.delivery.DeliverySettings; None: its defaults
    alert_interval_s: float | None = 15.0    # the alert evaluator's interval (docs/alerts.md); None: not here

    @classmethod
    def daemon(cls, env: Settings, **worker) -> ServeSettings:
        """The interpreter daemon of `a44 automation serve`: its WorkerSettings read from `env` with `worker`
        (lease_timeout, concurrency, worker_id, database_url, app_database_url, grace; None: env's), and the
        delivery worker's settings from `env`. ValueError names a setting out of range."""
        from ..runtime.engine import WorkerSettings
        from ..runtime.notify.delivery import DeliverySettings

        return cls(worker=WorkerSettings.from_settings(env, **worker), env=env,
                   notify=DeliverySettings.from_settings(env))


async def serve(settings: ServeSettings, stop: asyncio.Event, *, http: HttpFactory | None = None,
                ready: Callable[[str | None], None] | None = None, store=None, clock=None, registry=None) -> None:
    """Serve until `stop` is set, then stop the HTTP plane and the scheduler first (no new work comes in) and let
    the daemon finish in-flight steps within its grace. `ready(url)` is called once everything listens (the HTTP
    plane's URL, None without one). `store`, `clock`, `registry`: tests inject their own."""
    if settings.http is not None:
        settings.http.check()      # before anything starts: a refused host leaves nothing half-running
        if http is None:
            raise ValueError("serve(): settings.http needs an http factory")
    if settings.worker is None:
        await _http_only(settings, stop, http, ready, store, clock)
        return
    from ..runtime.engine import Daemon
    from .metrics import Flusher

    daemon = Daemon(settings.worker, store=store, registry=registry, clock=clock)
    await daemon.start()
    plane = await _start_http(daemon.store, settings.http, http) if settings.http is not None else None
    scheduler = _start_scheduler(daemon, stop)
    notifier = _start_notifier(daemon, settings.notify, stop)
    evaluator = _start_evaluator(daemon, settings.alert_interval_s, stop)
    retention = _start_retention(daemon, stop, settings.env)
    buffers = _start_buffers(daemon, stop)
    # without an HTTP plane (which flushes its own), this process's counters still reach the persisted totals
    flusher = Flusher(daemon.store).start() if plane is None else None
    intake = asyncio.create_task(_stop_intake(stop, plane, scheduler, daemon, flusher, notifier, evaluator,
                                              retention, buffers))
    if ready is not None:
        ready(plane.url if plane is not None else None)
    try:
        await daemon.serve()
    finally:
        stop.set()
        await intake


async def _http_only(settings, stop, factory, ready, store, clock) -> None:
    from ..clock import SystemClock
    from ..paths import storage_root
    from ..runtime.postgres.database import resolve_url
    from ..runtime.store.core import Store
    from ..runtime.store.migrate import log_migrated

    own = store is None
    if own:
        url = settings.database_url or await asyncio.to_thread(resolve_url, settings.env, start=True)
        store = await Store.connect(url, clock=clock or SystemClock(), max_size=settings.http.pool_size,
                                    results_dir=storage_root(settings.env.home),
                                    session_url=settings.env.database_session_url)
    try:
        log_migrated(await store.migrate())
        settings.http.tune(store)
        plane = await factory(store, settings.http).start()
        if ready is not None:
            ready(plane.url)
        await stop.wait()
        await plane.stop()
    finally:
        if own:
            await store.close()


async def _start_http(worker_store, settings: HttpSettings, factory: HttpFactory) -> HttpPlane:
    """The HTTP plane on its own pool, so requests never wait for worker connections."""
    from ..runtime.store.core import Store

    store = await Store.connect(worker_store.url, clock=worker_store.clock, max_size=settings.pool_size,
                                storage=worker_store.results.storage, session_url=worker_store.session_url)
    settings.tune(store)
    try:
        plane = await factory(store, settings).start()
    except BaseException:
        await store.close()
        raise
    return plane


def _start_scheduler(daemon, stop: asyncio.Event) -> asyncio.Task | None:
    """The scheduler of schedule triggers beside the daemon; several processes may each run one."""
    if not daemon.settings.schedules:
        return None
    from ..runtime.scheduling import Scheduler

    sched = Scheduler(daemon.store, clock=daemon.engine.clock, name=daemon.settings.worker_id)
    return asyncio.create_task(sched.serve(stop))


def _start_buffers(daemon, stop: asyncio.Event) -> asyncio.Task:
    """The flusher of debounce and batch buffers beside the daemon, on the engine's clock; every daemon runs one
    (a due buffer is flushed once: runtime/buffers/flusher.py)."""
    from ..runtime.buffers.flusher import BufferFlusher

    return asyncio.create_task(BufferFlusher(daemon.store, clock=daemon.engine.clock).serve(stop))


def _start_notifier(daemon, settings, stop: asyncio.Event) -> tuple[asyncio.Task, float]:
    """The delivery worker of notifications beside the daemon, on its store and secret source; every daemon runs
    one (claims skip what another holds). With how long its sends in flight may take at shutdown."""
    from ..runtime.notify.delivery import Deliverer, DeliverySettings, DeliveryWorker

    settings = settings or DeliverySettings()
    deliverer = Deliverer(daemon.store, daemon.engine.registry.secrets, settings, clock=daemon.engine.clock)
    return asyncio.create_task(DeliveryWorker(deliverer).serve(stop)), settings.timeout.total_seconds() * 3


def _start_evaluator(daemon, interval_s: float | None, stop: asyncio.Event) -> asyncio.Task | None:
    """The alert evaluator beside the daemon; of several processes, the one holding its lease evaluates."""
    if interval_s is None:
        return None
    from ..runtime.alerts.evaluator import Evaluator

    ev = Evaluator(daemon.store, holder=daemon.settings.worker_id, interval_s=interval_s, clock=daemon.engine.clock)
    return asyncio.create_task(ev.serve(stop))


def _start_retention(daemon, stop: asyncio.Event, env: Settings) -> asyncio.Task:
    """Log retention beside the daemon (runtime/logs/retention.py): hourly, one daemon at a time."""
    from ..paths import log_archive_root
    from ..runtime.logs.retention import ARCHIVE_MONTHS, HOT_DAYS, retention_loop

    return asyncio.create_task(retention_loop(daemon.store, log_archive_root(env.home, env.log_archive_dir), stop,
                                              hot_days=env.log_hot_days or HOT_DAYS,
                                              archive_months=env.log_archive_months or ARCHIVE_MONTHS))


async def _stop_intake(stop: asyncio.Event, plane, scheduler, daemon, flusher=None, notifier=None,
                       evaluator=None, retention=None, buffers=None) -> None:
    """On `stop`: no new work (scheduler decisions and retention steps are transactions or atomic renames:
    cancelling one mid-way loses nothing; the HTTP plane stops taking webhooks and events), sends in flight finish
    (a send cut short stays leased and is sent again after its lease), then the daemon's graceful shutdown."""
    try:
        await stop.wait()
    finally:
        for task in (scheduler, retention, buffers):      # each flush is one transaction: cancelling loses nothing
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if notifier is not None:
            task, within = notifier
            await asyncio.wait({task}, timeout=within)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if plane is not None:
            await plane.stop()
            await plane.store.close()
        if evaluator is not None:   # it ends its round and gives its lease up, while the store is open
            with contextlib.suppress(Exception):
                await evaluator
        if flusher is not None:     # while the daemon's store is open: it closes when the daemon has stopped
            await flusher.stop()
        daemon.request_stop()
