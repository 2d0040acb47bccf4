"""The run state machine: which run state may follow which, and which attempt status may follow which.

This table is the contract of docs/states.md. The store-facing SQL enforces it: every run state change goes
through the `run_transition` operation of `engine_commit` (migration 0018) with the allowed source states of the
target (`allowed_from`), and a change the table does not allow writes nothing and raises `E_ILLEGAL_TRANSITION`. Tests read `run.state` events back and
check every logged change against `RUN_TRANSITIONS`.
"""

from __future__ import annotations

from ...errors import E_ILLEGAL_TRANSITION, A44Error
from ..store.core import RUN_STATES, TERMINAL_RUN_STATES

PENDING, RUNNING, WAITING, SLEEPING = "pending", "running", "waiting", "sleeping"
AWAITING_CONFIRMATION, COMPENSATING = "awaiting_confirmation", "compensating"
SUCCEEDED, FAILED, COMPENSATION_FAILED, CANCELLED = "succeeded", "failed", "compensation_failed", "cancelled"
PARTIAL = "partial"
BLOCKED_VERSION = "blocked_version"     # a code run whose code contradicts its history (docs/verify.md)

# Runs a worker may be granted when due (next_wake_at <= now). `running` is claimable only because its lease
# expired: while a worker holds it, next_wake_at is the lease deadline.
CLAIMABLE = (PENDING, RUNNING, WAITING, SLEEPING, COMPENSATING)

# from -> the states it may move to (why, in docs/states.md)
RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    PENDING: frozenset({RUNNING, CANCELLED}),
    RUNNING: frozenset({PENDING, WAITING, SLEEPING, AWAITING_CONFIRMATION, COMPENSATING, BLOCKED_VERSION, SUCCEEDED,
                        PARTIAL, FAILED, CANCELLED}),
    WAITING: frozenset({RUNNING, CANCELLED}),
    SLEEPING: frozenset({RUNNING, CANCELLED}),
    AWAITING_CONFIRMATION: frozenset({PENDING, CANCELLED}),
    COMPENSATING: frozenset({FAILED, COMPENSATION_FAILED, CANCELLED}),   # cancelled: a cancel's compensations
    BLOCKED_VERSION: frozenset({PENDING, CANCELLED}),   # pending: `runs migrate` moved it; cancelled: `runs cancel`
    SUCCEEDED: frozenset(),
    PARTIAL: frozenset({SUCCEEDED}),    # finished; a person skipping its last failed partition completes it
    FAILED: frozenset(),
    COMPENSATION_FAILED: frozenset(),   # §6.2: never cleared automatically
    CANCELLED: frozenset(),
}
# Same-state updates that are not transitions: a lease re-grant of `running` / `compensating`, and releasing a
# compensating run to a durable wait. They change lease columns only and log no run.state event.
STAY = frozenset({RUNNING, COMPENSATING})

# Attempt statuses (step_attempts.status): `running` until it ends, then exactly one final status, once.
ATTEMPT_TRANSITIONS: dict[str, frozenset[str]] = {
    "running": frozenset({"succeeded", "failed", "timeout", "lease_expired", "compensated", "compensation_failed",
                          "cancelled"}),
    **{s: frozenset() for s in ("succeeded", "failed", "timeout", "skipped", "compensated", "compensation_failed",
                                "lease_expired", "cancelled")},
}

assert set(RUN_TRANSITIONS) == set(RUN_STATES)
assert {s for s, nxt in RUN_TRANSITIONS.items() if not nxt} == TERMINAL_RUN_STATES - {PARTIAL}


def allowed_from(target: str) -> list[str]:
    """The states a run may be in to move to `target` (including itself where staying is allowed)."""
    if target not in RUN_TRANSITIONS:
        raise ValueError(f"unknown run state {target!r}")
    src = [s for s, nxt in RUN_TRANSITIONS.items() if target in nxt]
    if target in STAY:
        src.append(target)
    return sorted(src)


def is_legal(source: str, target: str) -> bool:
    return target in RUN_TRANSITIONS.get(source, ()) or (source == target and source in STAY)


def illegal(run_id: str, source: str | None, target: str) -> A44Error:
    return A44Error(E_ILLEGAL_TRANSITION,
                    f"run {run_id} cannot move from {source or 'an unknown state'} to {target}",
                    hint="docs/states.md lists the allowed transitions",
                    details={"from": source, "to": target, "run_id": run_id})
