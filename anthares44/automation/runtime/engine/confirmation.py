"""A person's decision on an interrupted exclusive step (§7.3): `resolve_confirmation(store, run, step, outcome)`.

A run parks in `awaiting_confirmation` when its lease expired while an `exclusive: true` step was running: the
effect may or may not have happened, and only a person can say. The outcome:
  succeeded  the effect happened: an attempt `succeeded` is recorded (its result is `output`, default
             {"confirmed": "succeeded"}); the run continues after the step
  failed     it did not and must not be retried: an attempt `failed` with E_CONFIRMED_FAILED (permanent) is
             recorded; the run fails (compensating completed steps first, §6.1)
  retry      it did not happen, or repeating it is safe: the step runs again with attempt + 1
In every case the run becomes `pending` (due now) in the same transaction; a worker picks it up.
"""

from __future__ import annotations

from typing import Any

from ...errors import E_CONFIRMED_FAILED, E_PARAMS_INVALID, E_RUN_NOT_FOUND, A44Error
from ..store.core import Store
from ..store.results import encode_json
from .states import PENDING, illegal

OUTCOMES = ("succeeded", "failed", "retry")


async def resolve_confirmation(store: Store, run_id: str, step_id: str, outcome: str, *, by: str | None = None,
                               output: Any = None) -> dict:
    """Resolve the exclusive step `step_id` of a run in `awaiting_confirmation`. Raises E_RUN_NOT_FOUND, or
    E_ILLEGAL_TRANSITION when the run is not parked on that step. Returns {run_id, step_id, outcome, state}."""
    if outcome not in OUTCOMES:
        raise A44Error(E_PARAMS_INVALID, f"outcome must be one of {', '.join(OUTCOMES)}, not {outcome!r}")
    now = store.clock.now()
    who = by or "a person"
    async with store.transaction("resolve_confirmation") as conn:
        row = await conn.fetchrow("confirmation_resolve", run_id=run_id, step_id=step_id, now=now, outcome=outcome,
                                  who=who)
        if row is None:
            run = await conn.fetchrow("run_get", run_id=run_id, project=None)
            if run is None:
                raise A44Error(E_RUN_NOT_FOUND, f"no run {run_id}", hint="`a44 automation runs` lists the runs")
            err = illegal(run_id, run["state"], PENDING)
            err.message = (f"run {run_id} is {run['state']}" + (f" on step {run['current_step']}"
                                                                 if run["current_step"] else "")
                           + f"; only a run in awaiting_confirmation on step {step_id} can be resolved")
            raise err
        if outcome != "retry":
            last = await conn.fetchval("confirmation_last_attempt", run_id=run_id, step_id=step_id, epoch=row["epoch"])
            if outcome == "succeeded":
                status, code, message = "succeeded", None, None
                result = encode_json(output if output is not None else {"confirmed": "succeeded", "by": who})
            else:
                status, code, result = "failed", E_CONFIRMED_FAILED, None
                message = f"{who} confirmed that step {step_id} failed after its lease expired"
            await conn.fetchval("engine_attempt_record", run_id=run_id, step_id=step_id, attempt=last + 1,
                                key=f"{run_id}:{step_id}", started_at=now, epoch=row["epoch"], kind="action",
                                project=row["project_id"], worker_id=f"confirmed-by:{who}", lease_grant=None,
                                status=status, error_code=code, error_message=message, result=result,
                                result_bytes=None if result is None else len(result.encode()), retry_at=None,
                                result_ref=None, finished_at=now)
    return {"run_id": run_id, "step_id": step_id, "outcome": outcome, "state": PENDING}
