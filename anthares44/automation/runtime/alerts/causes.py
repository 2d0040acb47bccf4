"""What an alert says about what caused it (docs/alerts.md "Messages"): the second seed's six fields, as structured
data, and the next command chosen from what failed.

- `run_context`: a run outcome's workflow, run, failed step or failed partitions (each with its error code and
  attempts), error type, attempts, and the next command: `replay RUN --failed-partitions` when partitions failed,
  `replay RUN --from-step STEP` when a step did, `runs resolve` for a parked step, the logs for a failed
  compensation.
- `dead_letter_context`: the newest dead letters of a queue (at most MAX_CAUSES): for DLQ growth and for a rule
  on `automation.dlq_depth`, with `dlq redrive` filtered on their error code.
- `causes`: the keys an alert's incident groups by (incidents.py): `run:RUN` per run, `dead_letter:ID` for a dead
  letter that never became a run.
"""

from __future__ import annotations

import re
import shlex

from ...errors import E_EXPECTATION_FAILED, E_STEP_TIMEOUT, A44Error

MAX_CAUSES = 5                      # dead letters a DLQ alert names
_SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")


def project_flag(project: str) -> str:
    return f" --project {shlex.quote(project)}"


def error_type(code: str | None) -> str | None:
    """What kind of failure: `timeout`, `expectation` (the data was wrong), `retryable` or `permanent`."""
    if code is None:
        return None
    if code == E_STEP_TIMEOUT:
        return "timeout"
    if code == E_EXPECTATION_FAILED:
        return "expectation"
    return "retryable" if A44Error(code, "").retryable else "permanent"


def next_action(project: str, state: str, run_id: str, step: str | None, *, partitions: bool = False,
                workflow: str | None = None, version: int | None = None) -> str:
    """The command to paste, from what failed: the partitions that failed, else the step, else the whole run."""
    flag = project_flag(project)
    if state == "blocked_version":      # the code contradicts the run's history (docs/verify.md)
        # moved to a version whose code replays its history (runs migrate judges it by the replay gate), or ended
        return (f"a44 automation runs migrate --workflow {shlex.quote(workflow or '?')} --to N --from {version}{flag}"
                f"  # N: a version whose code replays it (verify FILE first); or: a44 automation runs cancel "
                f"{run_id}{flag}")
    if state == "awaiting_confirmation":
        return (f"a44 automation runs resolve {run_id} --step {shlex.quote(step or '?')} "
                f"--outcome succeeded|failed|retry{flag}")
    if state == "compensation_failed":
        return (f"a44 automation logs {run_id}{flag}  # undo step {step}'s effect by hand: "
                "compensation_failed runs are never retried")
    if partitions:
        return f"a44 automation replay {run_id} --failed-partitions{flag}"
    cut = f" --from-step {shlex.quote(step)}" if step else ""
    return f"a44 automation replay {run_id}{cut}{flag}"


def redrive_action(project: str, queue: str, code: str | None) -> str:
    flt = ""
    if code and _SAFE.match(code):      # as docs/queues.md writes it
        flt = ' --filter "error_code == ' + f"'{code}'" + '"'
    elif code:
        flt = f" --filter {shlex.quote(f'error_code == {code!r}')}"
    return f"a44 automation dlq redrive {shlex.quote(queue)}{flt}{project_flag(project)}"


def run_context(e) -> dict:
    """A run outcome (a row of `alert_run_outcomes`) as an alert's context."""
    step = e["step_id"]
    extra = {}
    data = e["alert_data"] or {}      # what the interpreter said when it parked or gave up (engine/saga.py)
    for key in ("compensation_step", "compensation_error_code", "compensation_attempts", "recommended_action"):
        if data.get(key) is not None:
            extra[key] = data[key]
    failed = list(e["failed_partitions"] or [])
    ctx = {**extra, "workflow": e["workflow_id"], "version": e["version"], "run_id": e["run_id"],
           "state": e["state"], "failed_step": step, "partition_key": e["partition_key"], "queue": e["queue"],
           "error_code": e["error_code"], "error_type": error_type(e["error_code"]),
           "error_message": e["error_message"], "attempts": e["attempts"],
           "next_action": next_action(e["project_id"], e["state"], e["run_id"], step, partitions=bool(failed),
                                      workflow=e["workflow_id"], version=e["version"]),
           "runs_seen": [e["run_id"]], "steps_seen": [step], "partitions_seen": [e["partition_key"]],
           "causes": [f"run:{e['run_id']}"]}
    where = f"at step {step or '-'}"
    if failed:
        for f in failed:
            f["error_type"] = error_type(f["error_code"])
        steps = sorted({f["step"] for f in failed})
        count = e["failed_partition_count"] or len(failed)
        ctx.update(failed_partitions=failed, failed_partition_count=count,
                   failed_step=step if step in steps else steps[0],
                   partition_key=e["partition_key"] or failed[0]["partition"],
                   attempts=sum(f["attempts"] for f in failed),
                   partitions_seen=[f["partition"] for f in failed], steps_seen=steps)
        where = f"{count} partition(s) of {', '.join(steps)} failed: " + ", ".join(
            f"{f['partition']} ({f['error_code']})" for f in failed[:3]) + (" ..." if count > 3 else "")
    if e["dead_letter"]:
        ctx.update(dead_letter_id=e["dead_letter"]["dead_letter_id"],
                   redrive_action=redrive_action(e["project_id"], e["dead_letter"]["queue"], e["error_code"]))
    ctx["title"] = f"{e['workflow_id']} run {e['state']}: {e['error_code'] or '-'} {where}"
    if e["state"] == "blocked_version":
        ctx["title"] = (f"{e['workflow_id']} v{e['version']} run blocked_version at step {step or '-'}: its code "
                        f"contradicts its history")
    if e["root_run_id"] is not None:    # a child workflow's run (§21): the alert names the tree it belongs to
        ctx.update(root_run_id=e["root_run_id"], parent_run_id=e["parent_run_id"])
        ctx["title"] += f" (child of run {e['parent_run_id']}, root run {e['root_run_id']})"
    return ctx


async def dead_letter_context(store, project: str, queue: str) -> dict:
    """The newest dead letters of `queue` (its causes), the latest's six fields at the top level, and the redrive
    command filtered on the latest's error code."""
    rows = await store.fetch("alert_dead_letters_recent", project=project, queue=queue, limit=MAX_CAUSES)
    code = rows[0]["error_code"] if rows else None
    ctx: dict = {"queue": queue, "next_action": redrive_action(project, queue, code)}
    if not rows:
        return ctx
    d = rows[0]
    letters = [{"dead_letter_id": r["dead_letter_id"], "run_id": r["run_id"], "workflow": r["workflow_id"],
                "failed_step": r["step_id"], "partition_key": r["partition_key"], "error_code": r["error_code"],
                "error_type": error_type(r["error_code"]), "attempts": r["attempts"]} for r in rows]
    ctx.update({"workflow": d["workflow_id"], "run_id": d["run_id"], "dead_letter_id": d["dead_letter_id"],
                "failed_step": d["step_id"], "partition_key": d["partition_key"], "error_code": code,
                "error_type": error_type(code), "error_message": d["error_message"], "attempts": d["attempts"],
                "dead_letters": letters,
                "runs_seen": [r["run_id"] for r in rows if r["run_id"]],
                "steps_seen": [r["step_id"] for r in rows if r["step_id"]],
                "partitions_seen": [r["partition_key"] for r in rows if r["partition_key"]]})
    return ctx


CAUSED_STATES = ("failed", "partial", "compensation_failed", "awaiting_confirmation", "blocked_version")


async def runs_context(store, project: str, workflow: str, state: str) -> dict:
    """A rule on `automation.runs{workflow, state}` of a state that needs a person: the newest runs in it (at most
    MAX_CAUSES), the latest's fields at the top level and its next command."""
    rows = await store.fetch("alert_runs_recent", project=project, workflow=workflow, state=state, limit=MAX_CAUSES)
    if not rows:
        return {}
    runs = [{"run_id": r["run_id"], "workflow": r["workflow_id"], "state": r["state"],
             "failed_step": r["failed_step"], "partition_key": r["partition_key"], "error_code": r["error_code"],
             "error_type": error_type(r["error_code"]), "attempts": r["attempts"]} for r in rows]
    d = rows[0]
    step = d["failed_step"] or (d["current_step"] if state == "awaiting_confirmation" else None)
    partitions = state == "partial" or d["error_code"] == "E_PARTITIONS_FAILED"
    return {"workflow": workflow, "run_id": d["run_id"], "state": state, "failed_step": step,
            "partition_key": d["partition_key"], "error_code": d["error_code"], "error_type": error_type(d["error_code"]),
            "error_message": d["error_message"], "attempts": d["attempts"], "runs": runs,
            "runs_seen": [r["run_id"] for r in rows], "causes": [f"run:{r['run_id']}" for r in rows],
            "next_action": next_action(project, state, d["run_id"], step, partitions=partitions, workflow=workflow,
                                       version=d.get("version"))}


def dead_letter_causes(letters: list[dict], newest: int) -> list[str]:
    """The causes of the `newest` dead letters: their runs, or the letters themselves. Empty when more grew than
    are listed (an unnamed cause must not be folded into another's incident)."""
    if newest > len(letters):
        return []
    return [f"run:{d['run_id']}" if d["run_id"] else f"dead_letter:{d['dead_letter_id']}" for d in letters[:newest]]
