"""The delivery worker every daemon runs (app/serve.py): claims due notifications, sends each, records the outcome.

A claim (`notify_claim`, FOR UPDATE SKIP LOCKED: two daemons never hold the same row) counts the attempt and
leases the row: its `next_attempt_at` moves to the end of the lease (twice the send timeout, plus a second), and
the send happens outside any transaction. The outcome is written fenced by the attempt number, so the writer
of an attempt whose lease was taken over changes nothing. A daemon killed mid-send leaves the row pending with
its lease: when it ends the row is due again and is sent again with the same idempotency key (at least once;
`delivered_at` set means never again).

A failed send is retried after `base * 2^(attempt-1)` capped at `max`, with jitter (half to all of it; at least
what a 429/503's Retry-After asks, within `max`), until `max_attempts` sends; a refusal for good (4xx other than
408/429, SMTP 5xx) fails at once. A notification that fails logs a WARNING naming the channel and the command that
sends it again, and counts in `automation_notifications_failed_total` (docs/notifications.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from ...clock import wait_event
from ...durations import parse_duration, reconnect_delay
from ...errors import A44Error
from .messages import Notification
from .outcome import Outcome, Secrets
from .senders import Senders

log = logging.getLogger("a44.notify")
POLL = timedelta(seconds=1)        # longest sleep between two looks at the outbox
MIN_SLEEP = 0.05                   # seconds
BATCH = 16                         # notifications claimed (and sent side by side) at most per claim


@dataclass(frozen=True)
class DeliverySettings:
    retry_base: timedelta = timedelta(seconds=5)
    retry_max: timedelta = timedelta(minutes=15)
    max_attempts: int = 12
    timeout: timedelta = timedelta(seconds=10)

    @classmethod
    def from_settings(cls, settings) -> DeliverySettings:
        """From the A44_NOTIFY_* values of `settings` (settings.Settings, read by the edge); ValueError naming one
        that is wrong."""
        values = {}
        for field, var in (("retry_base", "notify_retry_base"), ("retry_max", "notify_retry_max"),
                           ("timeout", "notify_timeout")):
            text = getattr(settings, var)
            if text:
                try:
                    values[field] = parse_duration(text)
                except ValueError as exc:
                    raise ValueError(f"A44_{var.upper()}: {exc}") from None
        if settings.notify_max_attempts is not None:
            values["max_attempts"] = settings.notify_max_attempts
        d = dataclasses.replace(cls(), **values)
        if d.max_attempts < 1:
            raise ValueError("A44_NOTIFY_MAX_ATTEMPTS must be at least 1")
        if d.timeout <= timedelta(0) or d.retry_base <= timedelta(0) or d.retry_max < d.retry_base:
            raise ValueError("A44_NOTIFY_TIMEOUT and A44_NOTIFY_RETRY_BASE must be positive, "
                             "A44_NOTIFY_RETRY_MAX at least A44_NOTIFY_RETRY_BASE")
        return d

    @property
    def lease(self) -> timedelta:
        return self.timeout * 2 + timedelta(seconds=1)

    def backoff(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> timedelta:
        """The wait after failed send number `attempt` (1, 2, ...)."""
        cap = self.retry_max.total_seconds()
        full = min(cap, self.retry_base.total_seconds() * 2 ** min(max(attempt, 1) - 1, 40))
        wait = full * (0.5 + rng.random() / 2)
        if retry_after is not None:
            wait = max(wait, min(retry_after, cap))
        return timedelta(seconds=wait)


def retry_command(n_id: int) -> str:
    return f"a44 monitor notifications retry {n_id}"


class Deliverer:
    """Claims and sends; `deliver_due()` one batch, `deliver(id)` one notification now (`channel test`)."""

    def __init__(self, store, secrets: Secrets, settings: DeliverySettings | None = None, *,
                 rng: random.Random | None = None, clock=None):
        self.store = store
        self.settings = settings or DeliverySettings()
        self.clock = clock or store.clock
        self.rng = rng or random.Random()
        self.senders = Senders(secrets, self.settings.timeout.total_seconds())

    async def claim(self, limit: int = BATCH, only: int | None = None) -> list:
        now = self.clock.now()
        return await self.store.fetch("notify_claim", now=now, lease_until=now + self.settings.lease, limit=limit,
                                      id=only)

    async def deliver_due(self, limit: int = BATCH) -> int:
        """Claim up to `limit` due notifications and send them side by side; how many were claimed."""
        rows = await self.claim(limit)
        if rows:
            await asyncio.gather(*(self._one(r) for r in rows))
        return len(rows)

    async def deliver(self, notification_id: int) -> bool:
        """Send `notification_id` now if it is due and no daemon holds it; False when it was not claimed."""
        rows = await self.claim(1, only=notification_id)
        for r in rows:
            await self._one(r)
        return bool(rows)

    async def _one(self, row) -> str:
        n = Notification.of(row)
        try:
            outcome = await self.senders.send(n, row["channel_kind"], row["channel_config"])
        except Exception as exc:  # noqa: BLE001 - a sender's bug must not lose the row: it is retried, and said
            log.exception("notification %s to channel %s: sender error", n.id, n.channel)
            outcome = Outcome.later(f"sender error {type(exc).__name__}: {exc}")
        return await self.record(n, outcome)

    async def record(self, n: Notification, outcome: Outcome) -> str:
        """Write the outcome of attempt `n.attempt`: delivered | retry | failed | taken (the lease went on)."""
        now = self.clock.now()
        if outcome.delivered:
            done = await self.store.fetchval("notify_delivered", id=n.id, attempt=n.attempt, now=now)
            if done is not None:
                log.info("notification %s delivered to channel %s (attempt %d)", n.id, n.channel, n.attempt)
            return "delivered" if done is not None else "taken"
        if outcome.retry and n.attempt < self.settings.max_attempts:
            wait = self.settings.backoff(n.attempt, self.rng, outcome.retry_after)
            done = await self.store.fetchval("notify_retry_later", id=n.id, attempt=n.attempt, next=now + wait,
                                             error=outcome.error)
            if done is not None:
                log.info("notification %s to channel %s: attempt %d failed (%s); next in %.1fs", n.id, n.channel,
                         n.attempt, outcome.error, wait.total_seconds())
            return "retry" if done is not None else "taken"
        done = await self.store.fetchval("notify_failed", id=n.id, attempt=n.attempt, now=now, error=outcome.error)
        if done is None:
            return "taken"
        why = "refused for good" if not outcome.retry else f"no attempt left of {self.settings.max_attempts}"
        log.warning("notification %s to channel %s (project %s) FAILED after %d attempt(s), %s: %s; send it again "
                    "with `%s`", n.id, n.channel, n.project, n.attempt, why, outcome.error, retry_command(n.id))
        return "failed"

    async def close(self) -> None:
        await self.senders.close()


class DeliveryWorker:
    """The loop a daemon runs: deliver what is due, sleep until the clock reaches the next due attempt (a backoff's
    instant, so a VirtualClock drives it) or POLL of wall time passes (a notification enqueued by another process
    is an event, not an instant), until stopped."""

    def __init__(self, deliverer: Deliverer, poll: timedelta = POLL):
        self.deliverer, self.poll = deliverer, poll

    async def serve(self, stop: asyncio.Event) -> None:
        failures = 0
        try:
            while not stop.is_set():
                wake_at = None
                try:
                    claimed = await self.deliverer.deliver_due()
                    failures = 0
                    wake_at, timeout = (None, 0) if claimed == BATCH else await self._until_next()
                except Exception as exc:  # noqa: BLE001 - the database is away (A44Error) or a bug: never stop
                    failures += 1         # delivering for good; one line each, with a backoff (wall time)
                    timeout = reconnect_delay(failures)
                    what = str(exc) if isinstance(exc, A44Error) else f"{type(exc).__name__}: {exc}"
                    log.warning("notification delivery: %s; retrying in %.1fs", what, timeout)
                if timeout > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(timeout):
                            await wait_event(self.deliverer.clock, stop, wake_at)
        finally:
            await self.deliverer.close()

    async def _until_next(self) -> tuple[datetime | None, float]:
        """The next due attempt's instant (None: none queued) and the wall-time limit of the wait."""
        due = await self.deliverer.store.fetchval("notify_next_due")
        poll = self.poll.total_seconds()
        if due is None:
            return None, poll
        if due <= self.deliverer.clock.now():
            return None, MIN_SLEEP    # a due row another daemon is claiming right now: look again soon, not busily
        return due, poll
