"""Circuit breakers of declared connectors (§14), with their state in a shared BreakerStateStore (services.py; the
runtime keeps it in the control store) so that every daemon sees it.

Per (project, declared connector) with a `circuitBreaker:` block:
  * closed: every call goes through; its outcome is counted in one-second buckets (`BreakerStateStore.record`).
    When, over the last `window`, at least `minRequests` calls were counted and the share of failures is at or
    above `errorRateThreshold`, the breaker opens for `openFor`.
  * open: calls fail at once with `E_CIRCUIT_OPEN` (retryable, and the interpreter does not count it against the
    step's retry budget, compiler/retry_policy.py) with `details.retry_after_ms` = the time left, so the step is
    tried again when the breaker may let a probe through.
  * after `openFor`: exactly one call claims the probe (`BreakerStateStore.claim_probe` is atomic: of two daemons
    racing exactly one wins); every other call keeps getting `E_CIRCUIT_OPEN`.
    A successful probe closes the breaker (and forgets the old samples); a failed probe opens it again for twice
    the previous period, capped at 5 minutes. A probe whose worker vanished is reclaimable after its deadline.

A failure, for the breaker, is what says the far side is unwell: a retryable error (`E_NETWORK`,
`E_STEP_TIMEOUT`, `E_TUNNEL_DOWN`, `E_UPSTREAM_5xx`/429...) or a cancellation by the step timeout. A permanent
error (400, 404, invalid parameters) is the caller's problem and counts as a success of the far side.

Instants come from the injected clock (ManualClock in tests), never from the database's now(). Cost while
closed: one read of the state and one write of the outcome per call.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..errors import E_CIRCUIT_OPEN, A44Error
from .services import BREAKER_STATE, BreakerState, BreakerStateStore, ContextClock

log = logging.getLogger("a44.connector.breaker")

MAX_OPEN_MS = 5 * 60 * 1000
PROBE_GRACE_S = 5.0          # a probe claim lasts the step's remaining time plus this, then is reclaimable
_DEFAULTS = {"errorRateThreshold": 0.5, "window": 60_000, "openFor": 30_000, "minRequests": 10}


@dataclass(frozen=True)
class BreakerConfig:
    error_rate: float
    window_ms: int
    open_for_ms: int
    min_requests: int

    @classmethod
    def of(cls, raw: dict[str, Any]) -> BreakerConfig:
        c = {**_DEFAULTS, **{k: v for k, v in raw.items() if v is not None}}
        return cls(float(c["errorRateThreshold"]), int(c["window"]), int(c["openFor"]), int(c["minRequests"]))


def is_failure(err: BaseException | None) -> bool:
    """Does this outcome count against the far side?"""
    if err is None:
        return False
    if isinstance(err, A44Error):
        if err.code == E_CIRCUIT_OPEN:
            return False
        return bool(err.details.get("retryable", err.retryable))
    return isinstance(err, (TimeoutError, asyncio.CancelledError))


class CircuitBreakers(ContextClock):
    """The breakers of one registry (one daemon); the state they share is the BreakerStateStore the engine passes
    as `ctx.services[BREAKER_STATE]`."""

    async def call(self, connector_id: str, raw_config: dict[str, Any], ctx,
                   body: Callable[[], Awaitable[Any]]) -> Any:
        """Run `body()` through the breaker of (ctx.project_id, connector_id)."""
        store: BreakerStateStore | None = ctx.services.get(BREAKER_STATE)
        if store is None:     # no shared state: no breaker (tests of connectors without PostgreSQL)
            return await body()
        cfg = BreakerConfig.of(raw_config)
        project = ctx.project_id
        now = self.now(ctx)
        probe: str | None = None
        row = await store.state(project, connector_id)
        if row is not None:
            token = f"{ctx.idempotency_key}#{ctx.attempt}#{secrets.token_hex(4)}"
            left_s = max(0.0, ctx.deadline - time.monotonic())
            if not await store.claim_probe(project, connector_id, now, token,
                                           now + timedelta(seconds=left_s + PROBE_GRACE_S)):
                raise self._open_error(connector_id, row, now)
            probe = token
            log.info("circuit %s/%s: probe claimed by %s", project, connector_id, ctx.idempotency_key)
        try:
            result = await body()
        except asyncio.CancelledError as exc:
            # the step timeout cancelled us: record without delaying the cancellation
            asyncio.ensure_future(self._record(store, cfg, project, connector_id, ctx, probe, exc))
            raise
        except BaseException as exc:
            await self._record(store, cfg, project, connector_id, ctx, probe, exc)
            raise
        await self._record(store, cfg, project, connector_id, ctx, probe, None)
        return result

    async def _record(self, store: BreakerStateStore, cfg: BreakerConfig, project: str, connector_id: str, ctx,
                      probe: str | None, err: BaseException | None) -> None:
        failed = is_failure(err)
        now = self.now(ctx)
        try:
            if probe is not None:
                if failed:
                    open_for = await store.probe_failed(project, connector_id, now, cfg.open_for_ms, MAX_OPEN_MS,
                                                        probe)
                    if open_for is not None:
                        log.warning("circuit %s/%s: probe failed, open for %d ms", project, connector_id, open_for)
                else:
                    await store.probe_succeeded(project, connector_id, now, probe)
                    log.info("circuit %s/%s: probe succeeded, closed", project, connector_id)
                return
            bucket = now.replace(microsecond=0)
            ok, fails = await store.record(project, connector_id, bucket, 0 if failed else 1, 1 if failed else 0,
                                           bucket - timedelta(milliseconds=cfg.window_ms) + timedelta(seconds=1))
            total = ok + fails
            if failed and total >= cfg.min_requests and fails / total >= cfg.error_rate:
                until = await store.open(project, connector_id, now, cfg.open_for_ms)
                if until is not None:
                    log.warning("circuit %s/%s: opened (%d of %d failed in %d ms) until %s", project, connector_id,
                                fails, total, cfg.window_ms, until.isoformat())
        except Exception:  # noqa: BLE001 - the breaker must never turn a step's outcome into another one
            log.exception("circuit %s/%s: could not record an outcome", project, connector_id)

    @staticmethod
    def _open_error(connector_id: str, row: BreakerState, now: datetime) -> A44Error:
        if row.state == "open" and row.opened_until is not None:
            wait_ms = max(0, int((row.opened_until - now).total_seconds() * 1000))
        else:  # a probe is in flight: look again shortly
            wait_ms = 1000
            if row.probe_until is not None:
                wait_ms = max(250, min(wait_ms, int((row.probe_until - now).total_seconds() * 1000)))
        return A44Error(E_CIRCUIT_OPEN,
                        f"the circuit breaker of {connector_id} is {row.state.replace('_', '-')}; "
                        f"the far side was failing (next probe in {wait_ms} ms)",
                        details={"retryable": True, "retry_after_ms": wait_ms, "connector": connector_id,
                                 "state": row.state})
