"""A person's hand on a durable timer (§19, docs/timers.md): `wake(store, project, run, step, by=, reason=)` ends
an open sleep now, `reschedule(..., until=)` moves its due instant; both recorded in the run's log (`timer.woken`,
`timer.rescheduled`) with who, why and the instant they replaced.

Each is one conditional statement (`timer_move`, migration 0034) under the run's row lock, the lock the engine's
fence takes: it moves the instant only of a sleep still `running` whose instant has not come, so against the timer
firing at the same moment exactly one wins. A sleep that fired, or is due and about to, refuses with
E_TIMER_NOT_SLEEPING; the engine's fire checks the instant it read is still the stored one (sleeps.py), so a move
committed between its read and its commit makes the fire write nothing. A released run is made due at the new
instant; a leased one finds it when its visit releases (`timer_check`). An instant past the run's deadline is
refused with E_SLEEP_EXCEEDS_RUN_DEADLINE, as when the sleep opened.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ...calendar import CalendarError, parse_instant
from ...errors import (
    E_INVALID_ARGUMENT,
    E_RUN_NOT_FOUND,
    E_SLEEP_EXCEEDS_RUN_DEADLINE,
    E_TIMER_NOT_SLEEPING,
    A44Error,
)
from ..store.core import Store

WOKEN, RESCHEDULED = "timer.woken", "timer.rescheduled"


async def wake(store: Store, project: str, run_id: str, step: str, *, by: str, reason: str) -> dict[str, Any]:
    """End sleep `step` of `run_id` now. Returns {run_id, step_id, due_at, by, reason, event}."""
    now = store.clock.now()
    return await _move(store, project, run_id, step, now, now, WOKEN, by, reason)


async def reschedule(store: Store, project: str, run_id: str, step: str, *, until: str | datetime, by: str,
                     reason: str | None = None) -> dict[str, Any]:
    """Move the due instant of sleep `step` of `run_id` to `until` (an ISO 8601 instant with its offset; a past
    one fires at once). Returns {run_id, step_id, due_at, by, reason, event}."""
    if isinstance(until, str):
        try:
            until = parse_instant(until)
        except CalendarError as exc:
            raise A44Error(E_INVALID_ARGUMENT, f"--until: {exc}") from None
    return await _move(store, project, run_id, step, until.astimezone(UTC), store.clock.now(), RESCHEDULED, by,
                       reason)


async def _move(store: Store, project: str, run_id: str, step: str, due: datetime, now: datetime, kind: str,
                by: str, reason: str | None) -> dict[str, Any]:
    reason = reason.strip() if reason and reason.strip() else None
    row = await store.fetchrow("timer_move", project=project, run_id=run_id, step=step, due=due, now=now,
                               kind=kind, who=by, reason=reason)
    assert row is not None      # timer_move selects two scalars, no FROM: always one row
    outcome = row["outcome"]
    if outcome == "no_run":
        raise A44Error(E_RUN_NOT_FOUND, f"no run {run_id} in project {project}",
                       hint="`a44 automation runs` lists the runs")
    if outcome == "not_sleeping":
        raise A44Error(E_TIMER_NOT_SLEEPING, f"step {step} of run {run_id} is not an open sleep",
                       hint=f"`a44 automation runs {run_id}` shows its open timers (`timers`)",
                       details={"run_id": run_id, "step_id": step})
    if outcome == "due":
        raise A44Error(E_TIMER_NOT_SLEEPING, f"sleep {step} of run {run_id} is due already: its timer fires now",
                       details={"run_id": run_id, "step_id": step})
    if outcome == "past_deadline":
        raise A44Error(E_SLEEP_EXCEEDS_RUN_DEADLINE,
                       f"{due.isoformat()} is past the deadline of run {run_id} ({row['deadline_at'].isoformat()})",
                       hint="reschedule to an instant before the run's deadline",
                       details={"run_id": run_id, "step_id": step})
    return {"run_id": run_id, "step_id": step, "due_at": due, "by": by, "reason": reason, "event": kind}
