"""The upstream-429 pause (§22, docs/flow.md): a far side that says "slow down" pauses its flow key for every run
of every daemon, with the state in a shared PauseStore (services.py; the runtime keeps it in the control store).

A connector that can be told to slow down names the key of each call (`flow_key`: for `http`,
`<connector>:<project>:<host>` unless the step or the declared connector sets `rateKey`) and how long a pause may
last (`maxPause`, default 1 h). Around that call:
  * before: when the key is paused at the clock's instant the call is not made; the attempt fails with
    `E_UPSTREAM_429` (retryable, no retry budget used: errors.FREE_RETRY_CODES) whose `details.retry_after_ms` is
    the time left, so the interpreter releases the run until the pause ends (a retry wait, holding no worker);
  * after: a call that failed with a retryable `E_UPSTREAM_429` (the http connector's 429, or 503 with
    `Retry-After`) pauses the key for what `Retry-After` asked, clamped to [MIN_PAUSE_MS, maxPause]; a pause
    already in place that lasts longer is kept (two daemons answered at once: the later end wins). The attempt's
    `retry_after_ms` becomes the pause's end, so it too waits the whole pause.
The message of either attempt names the key and the pause's end (`flow key K paused until T`): the run's view
says on what it waits, and `flow resume` finds the runs to wake by it (runtime/flow_pauses.py).

What a daemon knows of the pauses: the keys of a project paused now, read at most once a second (REFRESH, on the
engine's clock) and updated at once by the pauses this daemon records itself. A call whose key that view does not
hold goes without a read of its own, so an `http` step costs no extra round trip; a call whose key the view holds
reads the key itself before it is refused (a resume or a shortened pause elsewhere is not missed). A pause another
daemon (or an operator) set is so seen within a second: the calls of that second reach the far side, which
answers them as it answers (a 429 merges into the pause).

Instants come from the injected clock (the engine's), never from the database's now().
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..compiler.models.params import DEFAULT_MAX_PAUSE_MS, MIN_PAUSE_MS
from ..errors import E_UPSTREAM_429, A44Error
from .services import PAUSES, ContextClock, PauseStore

log = logging.getLogger("a44.connector.flow")



REFRESH = timedelta(seconds=1)      # how old a daemon's view of a project's pauses may get


@dataclass(frozen=True)
class FlowKey:
    """The key one call counts against and the longest pause it may cause."""
    key: str
    max_pause_ms: int = DEFAULT_MAX_PAUSE_MS


PAUSE_PREFIX = "flow key "


def key_marker(key: str) -> str:
    """How an attempt's message names the key it waits on, whatever the pause's end (`flow resume` finds the
    waiting runs by it: runtime/flow_pauses.py)."""
    return f"{PAUSE_PREFIX}{key} paused until "


def marker(key: str, until: datetime) -> str:
    """How an attempt's message names the pause it waits on."""
    return key_marker(key) + until.isoformat()


def pause_ms(retry_after_ms: Any, max_pause_ms: int) -> int:
    """How long a 429 pauses its key: what the far side asked, within [MIN_PAUSE_MS, max_pause_ms]."""
    asked = int(retry_after_ms) if isinstance(retry_after_ms, (int, float)) else MIN_PAUSE_MS
    return max(MIN_PAUSE_MS, min(asked, max(max_pause_ms, MIN_PAUSE_MS)))


@dataclass
class _View:
    """The keys of one project paused when they were read (`at`, the clock's instant), with their ends."""
    at: datetime
    keys: dict[str, datetime]


class FlowPauses(ContextClock):
    """The pauses of one registry (one daemon); the state they share is the PauseStore the engine passes as
    `ctx.services[PAUSES]`, and `_views` is what this daemon last read of it, per project."""

    def __init__(self, clock: Any = None):
        super().__init__(clock)
        self._views: dict[str, _View] = {}

    async def call(self, fk: FlowKey, ctx, body: Callable[[], Awaitable[Any]]) -> Any:
        """Run `body()` unless `fk` is paused; pause it when the far side says so."""
        store: PauseStore | None = ctx.services.get(PAUSES)
        if store is None:     # no shared state: no pauses (tests of connectors without PostgreSQL)
            return await body()
        project = ctx.project_id
        now = self.now(ctx)
        until = await self._paused_until(store, project, fk.key, now)
        if until is not None:
            raise _waiting(fk.key, until, now, "the key is paused; the call was not made")
        try:
            return await body()
        except A44Error as err:
            if err.code != E_UPSTREAM_429 or not err.details.get("retryable", err.retryable):
                raise
            now = self.now(ctx)
            asked = pause_ms(err.details.get("retry_after_ms"), fk.max_pause_ms)
            try:
                until = await store.pause(project, fk.key, now, now + timedelta(milliseconds=asked),
                                          f"upstream {err.details.get('status', 429)}: {err.message}"[:500])
            except Exception:  # noqa: BLE001 - the 429 stays the step's outcome, retried after what it asked
                log.exception("flow %s/%s: could not record the pause", project, fk.key)
                err.details["retry_after_ms"] = asked
                raise err from None
            self._views.setdefault(project, _View(now, {})).keys[fk.key] = until
            log.warning("flow %s/%s: the far side answered %s, paused until %s", project, fk.key,
                        err.details.get("status", 429), until.isoformat())
            raise _waiting(fk.key, until, now, err.message, details=err.details) from None

    async def _paused_until(self, store: PauseStore, project: str, key: str, now: datetime) -> datetime | None:
        """The end of `key`'s pause when it is paused at `now`: the view of the project says whether it may be
        (read again when it is a REFRESH old), the key's own row confirms it. An unreadable pause is no pause: the
        call goes (logged), it must not fail the step."""
        try:
            view = self._views.get(project)
            if view is None or now - view.at >= REFRESH or now < view.at:
                if view is not None:     # the calls meanwhile go by the old view: one read, not one per call
                    view.at = now
                view = self._views[project] = _View(now, await store.paused_keys(project, now))
            if view.keys.get(key, now) <= now:
                return None
            until = await store.paused_until(project, key, now)
            if until is None:
                view.keys.pop(key, None)
            else:
                view.keys[key] = until
            return until
        except Exception:  # noqa: BLE001
            log.exception("flow %s/%s: could not read the pause", project, key)
            return None


def _waiting(key: str, until: datetime, now: datetime, why: str, details: dict[str, Any] | None = None) -> A44Error:
    left = max(0, int((until - now).total_seconds() * 1000))
    return A44Error(E_UPSTREAM_429, f"{why}; {marker(key, until)}",
                    details={**(details or {}), "retryable": True, "retry_after_ms": left, "flow_key": key,
                             "paused_until": until.isoformat()})
