"""A person's cancel (docs/states.md, "Cancel"): `cancel(store, project, run, by=..., reason=..., compensate=...)`.

The request is recorded on the run with who and why in one statement (`run_cancel`, migration 0020). A run no
worker holds (pending, waiting, sleeping, awaiting_confirmation, blocked_version) is cancelled in that same statement; a run a worker
holds (running, or a cancel's compensations in progress) is stopped by that worker at its next safe point: the
daemon hears of it on channel a44_run_cancel, and a worker that claims the run later finds the request on it.
Cancelling a cancelled run says so and changes nothing; a finished run, or one compensating after a failure,
refuses with E_CANCEL_NOT_ALLOWED.
"""

from __future__ import annotations

from typing import Any

from ...errors import E_CANCEL_NOT_ALLOWED, E_RUN_NOT_FOUND, A44Error
from ..store.core import Store
from .states import BLOCKED_VERSION

CANCELLED_NOW, REQUESTED, ALREADY = "cancelled", "requested", "already_cancelled"


def cancel_message(by: str, reason: str | None) -> str:
    """The run's error_message and log line of a cancel: who, and why when given."""
    return f"cancelled by {by}" + (f": {reason}" if reason else "")


async def cancel(store: Store, project: str, run_id: str, *, by: str, reason: str | None = None,
                 compensate: bool = False) -> dict[str, Any]:
    """Returns {run_id, outcome: cancelled | requested | already_cancelled, state, previous_state, by, reason,
    compensate}. `requested`: the worker holding the run (or the next one to claim it, to compensate) ends it."""
    reason = reason.strip() if reason and reason.strip() else None
    blocked = compensate and await store.fetchrow("run_get", run_id=run_id, project=project)
    if blocked and blocked["state"] == BLOCKED_VERSION:
        raise A44Error(E_CANCEL_NOT_ALLOWED, f"run {run_id} is blocked_version: its code contradicts its history, so "
                                             "its compensations cannot be recovered from the code",
                       hint="cancel it without --compensate (undo its steps by hand), or `a44 automation runs "
                            "migrate` it", details={"run_id": run_id, "state": BLOCKED_VERSION})
    row = await store.fetchrow("run_cancel", run_id=run_id, project=project, by=by, reason=reason,
                               compensate=compensate, message=cancel_message(by, reason), now=store.clock.now())
    outcome = row["outcome"]
    if outcome == "not_found":
        raise A44Error(E_RUN_NOT_FOUND, f"no run {run_id} in project {project}",
                       hint="`a44 automation runs` lists the runs")
    if outcome in ("finished", "compensating"):
        why = "it is finished" if outcome == "finished" else \
            "it is undoing its completed steps after a failure; it ends failed or compensation_failed"
        raise A44Error(E_CANCEL_NOT_ALLOWED, f"run {run_id} is {row['state']}: {why}",
                       hint="only a pending, waiting, sleeping, awaiting_confirmation, blocked_version or running run "
                            "can be cancelled",
                       details={"run_id": run_id, "state": row["state"]})
    return {"run_id": run_id, "outcome": ALREADY if outcome == "already" else outcome, "state": row["state"],
            "previous_state": row["prev_state"], "by": by, "reason": reason, "compensate": compensate}
