"""A run that diverges live stops in `blocked_version` (SPEC §23, docs/verify.md, docs/states.md).

A visit of a code workflow found the code asking for a step its history contradicts (E_NONDETERMINISTIC_REPLAY:
the code deployed for the run is not the code that made its log). Retrying cannot help and failing would lose a
run that a migration can still move, so the visit ends it in `blocked_version` in one commit: no lease, never due
(next_wake_at null), `failed_step` the divergent step, the error saying what the history has and what the code
asked for, and an `alert` event with the next command. The built-in alert `builtin:blocked_version`
(runtime/alerts/builtins.py) names workflow, version and step. A person settles it: `a44 automation runs migrate`
(moves it, back to pending) or `a44 automation runs cancel`.
"""

from __future__ import annotations

import shlex

from ...sdk.core import NonDeterministic
from .states import BLOCKED_VERSION
from .visit import Visit


def next_command(run_id: str, workflow_id: str, version: int) -> str:
    return (f"a44 automation runs migrate --workflow {shlex.quote(workflow_id)} --to N --from {version}"
            f"  # or: a44 automation runs cancel {run_id}")


async def block(v: Visit, err: NonDeterministic, summary: dict) -> str:
    """End the visit with the run in `blocked_version` at the divergent step (one commit)."""
    now = v.clock.now()
    step = err.observed or err.expected
    row = v.row
    b = v.batch
    b.current_step = step
    b.transition(BLOCKED_VERSION, now, release=True, failed_step=step, error=err, summary=summary)
    data = {"reason": "blocked_version", "workflow": row["workflow_id"], "version": row["version"], "step": step,
            "history_has": err.expected, "code_asked": err.observed,
            "recommended_action": next_command(v.lease.run_id, row["workflow_id"], row["version"])}
    b.event("alert", now, state=BLOCKED_VERSION, step_id=step, error_code=err.code, message=err.message, data=data)
    await b.commit(now)
    v.event(f"run.{BLOCKED_VERSION}", step=step, code=err.code)
    return BLOCKED_VERSION
