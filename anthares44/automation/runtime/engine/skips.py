"""A person's skip (docs/partitions.md): `skip(store, project, run, partition=P | step=S, reason=..., by=...)`.

Only a finished run (`partial` or `failed`) is touched, so no worker holds it: the run row is locked, a `skipped`
attempt is recorded for the partition (`step[partition]`) or step with who and why, the partition's row says
`skipped`, and `partition.skipped` / `step.skipped` goes into the run's log, all in one transaction. A `partial`
run whose last failed partition is skipped is complete: it becomes `succeeded`. A `failed` run completes with
`a44 automation replay RUN --failed-partitions`, which reuses skipped partitions and steps like succeeded ones.
"""

from __future__ import annotations

from typing import Any

from ...errors import E_PARAMS_INVALID, E_RUN_NOT_FOUND, E_SKIP_NOT_ALLOWED, E_UNKNOWN_PARTITION, A44Error
from ..store.core import Store
from ..store.results import encode_json
from .journal import attempt_key
from .progress import part_id
from .states import FAILED, PARTIAL, SUCCEEDED

SKIPPABLE_RUNS = (PARTIAL, FAILED)


async def skip(store: Store, project: str, run_id: str, *, reason: str, by: str, partition: str | None = None,
               step: str | None = None) -> dict[str, Any]:
    """Returns {run_id, step_id, partition, skipped_by, reason, state (the run's afterwards)}."""
    if not reason or not reason.strip():
        raise A44Error(E_PARAMS_INVALID, "a skip needs a reason (--reason ...)", hint="it is recorded in the log")
    if partition is None and step is None:
        raise A44Error(E_PARAMS_INVALID, "say what to skip: --partition P (and --step S when several steps have "
                                         "it) or --step S")
    now = store.clock.now()
    async with store.transaction("skip") as conn:
        run = await conn.fetchrow("skip_lock_run", run_id=run_id, project=project)
        if run is None:
            raise A44Error(E_RUN_NOT_FOUND, f"no run {run_id} in project {project}",
                           hint="`a44 automation runs` lists the runs")
        if run["state"] not in SKIPPABLE_RUNS:
            raise A44Error(E_SKIP_NOT_ALLOWED, f"run {run_id} is {run['state']}; only a partial or failed run's "
                                               f"failed partitions and steps can be skipped")
        if partition is not None:
            step = await _partition_step(conn, project, run_id, partition, step)
            target = part_id(step, partition)
        else:
            target = step
        last = await conn.fetchrow("skip_last_attempt", run_id=run_id, epoch=run["epoch"], step_id=target)
        if last is None or last["status"] not in ("failed", "timeout") or last["retry_at"] is not None:
            what = f"partition {partition} of step {step}" if partition is not None else f"step {step}"
            status = last["status"] if last is not None else "never attempted"
            raise A44Error(E_SKIP_NOT_ALLOWED, f"{what} of run {run_id} did not fail for good ({status})",
                           hint=f"`a44 automation partitions {run_id} --state failed` lists what can be skipped")
        await conn.fetchval("engine_attempt_record", run_id=run_id, step_id=target, attempt=last["attempt"] + 1,
                            key=attempt_key(run_id, target), started_at=now, epoch=run["epoch"], kind="action",
                            project=project, worker_id=f"skipped-by:{by}", lease_grant=None, status="skipped",
                            error_code=None, error_message=f"skipped by {by}: {reason}", result=None,
                            result_bytes=None, retry_at=None, result_ref=None, finished_at=now)
        data = {"step": step, "partition": partition, "by": by, "reason": reason}
        if partition is not None:
            await conn.fetchval("skip_partition", run_id=run_id, step_id=step, partition=partition, who=by,
                                reason=reason, now=now)
        await conn.fetchval("run_event_append", run_id=run_id, project=project, at=now,
                            kind="partition.skipped" if partition is not None else "step.skipped", state=None,
                            step_id=target, attempt=None, status="skipped", error_code=None,
                            message=f"{by} skipped {target}: {reason}", data=encode_json(data))
        state = run["state"]
        if state == PARTIAL and await conn.fetchval("skip_failed_left", run_id=run_id) == 0:
            await conn.fetchval("skip_complete_run", run_id=run_id, now=now, who=by)
            state = SUCCEEDED
    return {"run_id": run_id, "step_id": step, "partition": partition, "skipped_by": by, "reason": reason,
            "state": state}


async def _partition_step(conn, project: str, run_id: str, partition: str, step: str | None) -> str:
    rows = await conn.fetch("partition_list", project=project, run_id=run_id, workflow=None, state=None,
                            partition=partition, step=step, limit=10)
    if not rows:
        raise A44Error(E_UNKNOWN_PARTITION, f"run {run_id} has no partition {partition!r}"
                                            + (f" in step {step}" if step else ""),
                       hint=f"`a44 automation partitions {run_id}` lists them")
    steps = sorted({r["step_id"] for r in rows})
    if len(steps) > 1:
        raise A44Error(E_PARAMS_INVALID, f"partition {partition!r} of run {run_id} belongs to steps "
                                         f"{', '.join(steps)}", hint="say which with --step S")
    return steps[0]
