"""Replay (§13): re-execute terminal runs from a cut, reusing the results recorded before it.

A replay never edits history. It opens a new **epoch** of the run (`runs.epoch + 1`): the reused steps' last
successful attempts are copied into the new epoch (rows marked `worker_id = 'reused'`, their `attempt.finished`
events carry `reused_from_epoch`), the run becomes `pending` and due now, and any daemon picks it up through the
normal claim (queue concurrency applies). The interpreter reads the attempts of the current epoch only, so it
sees the reused steps as done and runs the rest. The attempts of older epochs stay in the log (`logs` shows the
EPOCH column).

Idempotence: each replay command has a request id derived from its selection and cut (`request_id`). Opening the
epoch of a run appends a `run.replayed` event carrying it, in the same transaction, under the run's row lock;
a run that already carries the request id is skipped. Interrupting a mass replay and running the same command
again therefore never replays a run twice.

Planning is pure (`plan.py`); this module reads and writes through the store's named queries (replay.sql).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ...attempts import Attempt
from ...compiler.ir import WorkflowIR, load_workflow_ir
from ...errors import E_INVALID_ARGUMENT, E_REPLAY_NOT_TERMINAL, A44Error
from ..engine.progress import split_part
from .plan import Cut, RunPlan, check_version, per_run_doc, plan_run, run_seconds, step_durations, summarize

if TYPE_CHECKING:
    from ..store.core import Store

__all__ = ["Selection", "Cut", "ReplayPlan", "prepare", "apply", "request_id", "REPLAYABLE"]

REPLAYABLE = ("succeeded", "partial", "failed", "cancelled")       # terminal, except compensation_failed (§6.2)
NEVER = "compensation_failed"
DEFAULT_CONCURRENCY = 16                                 # the daemon's default --concurrency


@dataclass(frozen=True)
class Selection:
    run_ids: tuple[str, ...] = ()
    state: str | None = None
    step: str | None = None
    since: str | None = None          # as typed (48h): the request id must not depend on when it is run
    since_at: datetime | None = None
    workflow: str | None = None

    def describe(self) -> dict:
        return {"runs": sorted(self.run_ids) or None, "state": self.state, "step": self.step, "since": self.since,
                "workflow": self.workflow}


def request_id(project: str, selection: Selection, cut: Cut, to_version: int | None) -> str:
    doc = {"project": project, "selection": selection.describe(), "cut": cut.describe(), "toVersion": to_version}
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    return "rpl_" + digest[:20]


@dataclass
class ReplayPlan:
    request_id: str
    cut: Cut
    to_version: int | None
    runs: list[dict] = field(default_factory=list)            # run rows to replay
    plans: dict[str, RunPlan] = field(default_factory=dict)
    irs: dict[str, WorkflowIR] = field(default_factory=dict)   # run_id -> IR it will run on
    warnings: list[str] = field(default_factory=list)
    estimated_seconds: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The manual's dry-run document (§13), key for key."""
        common, _ = summarize(list(self.plans.values()))
        return {"matched": len(self.runs), "fromStep": self.cut.from_step, "perRun": per_run_doc(common),
                "estimatedDurationSeconds": self.estimated_seconds, "warnings": list(self.warnings)}


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


async def _ir(store: Store, cache: dict, project: str, workflow_id: str, version: int) -> WorkflowIR:
    key = (project, workflow_id, version)
    if key not in cache:
        row = await store.get_version(project, workflow_id, version)
        cache[key] = load_workflow_ir(row["ir"])
    return cache[key]


async def prepare(store: Store, project: str, selection: Selection, cut: Cut, *, to_version: int | None = None,
                  concurrency: int = DEFAULT_CONCURRENCY, rate: float | None = None,
                  request: str | None = None) -> ReplayPlan:
    """Select the runs, check them, and compute per run what is reused and what runs again. Reads only."""
    if (cut.from_step is not None) + (cut.from_time is not None) + cut.failed_partitions != 1:
        raise A44Error(E_INVALID_ARGUMENT, "a replay needs exactly one cut: --from-step S, --from-time T or "
                                           "--failed-partitions")
    rid = request or request_id(project, selection, cut, to_version)
    rows = [dict(r) for r in await store.fetch("replay_select", project=project,
                                               run_ids=list(selection.run_ids) or None, state=selection.state,
                                               workflow=selection.workflow, step=selection.step,
                                               since=selection.since_at)]
    if selection.run_ids:
        missing = sorted(set(selection.run_ids) - {r["run_id"] for r in rows})
        if missing:
            from ...errors import E_RUN_NOT_FOUND
            raise A44Error(E_RUN_NOT_FOUND, f"no run {', '.join(missing)} in project {project}")
    busy = [r for r in rows if r["state"] not in REPLAYABLE and r["state"] != NEVER]
    if busy and (selection.run_ids or selection.state is not None):
        ex = ", ".join(f"{r['run_id']} ({r['state']})" for r in busy[:3])
        raise A44Error(E_REPLAY_NOT_TERMINAL,
                       f"{len(busy)} {_plural(len(busy), 'run is', 'runs are')} not terminal and cannot be "
                       f"replayed: {ex}{' ...' if len(busy) > 3 else ''}",
                       hint="wait for them to end (a44 automation run --wait / logs --follow); only succeeded, partial, "
                            "failed and cancelled runs are replayed")
    ignored = [r for r in rows if r["state"] == NEVER]
    runs = [r for r in rows if r["state"] in REPLAYABLE]
    plan = ReplayPlan(rid, cut, to_version)
    if ignored:
        plan.warnings.append(f"{len(ignored)} {_plural(len(ignored), 'run', 'runs')} in compensation_failed "
                             f"{_plural(len(ignored), 'was', 'were')} ignored")
    if busy:
        plan.warnings.append(f"{len(busy)} {_plural(len(busy), 'run', 'runs')} not terminal "
                             f"{_plural(len(busy), 'was', 'were')} skipped")
    cache: dict = {}
    attempts: dict[str, list[Attempt]] = {r["run_id"]: [] for r in runs}
    ids = [r["run_id"] for r in runs]
    for i in range(0, len(ids), 500):
        attempts.update(await _attempts_in_log_order(store, ids[i:i + 500]))
    by_version: dict[tuple, list[RunPlan]] = {}
    for r in runs:
        ir = await _ir(store, cache, project, r["workflow_id"], r["version"])
        p = plan_run(r["run_id"], ir, attempts[r["run_id"]], cut)
        plan.plans[r["run_id"]] = p
        plan.irs[r["run_id"]] = ir
        by_version.setdefault((r["workflow_id"], r["version"]), []).append(p)
    if to_version is not None:
        for (wf, version), plans in by_version.items():
            new = await _ir(store, cache, project, wf, to_version)
            if version != to_version:
                check_version(await _ir(store, cache, project, wf, version), new, plans, cut)
            for p in plans:
                plan.irs[p.run_id] = new
    plan.runs = runs
    _, differing = summarize(list(plan.plans.values()))
    if differing:
        ex = differing[0]
        plan.warnings.append(f"{len(differing)} {_plural(len(differing), 'run differs', 'runs differ')} from "
                             f"perRun (e.g. {ex.run_id}: reused {ex.reused}, replayed {ex.replayed})")
    plan.estimated_seconds = _estimate(plan, attempts, concurrency, rate)
    return plan


def _estimate(plan: ReplayPlan, attempts, concurrency: int, rate: float | None) -> int:
    if not plan.runs:
        return 0
    per_run = []
    durations_by_wf: dict[tuple, dict] = {}
    for r in plan.runs:
        ir = plan.irs[r["run_id"]]
        key = (ir.workflow_id, ir.version)
        if key not in durations_by_wf:
            mine = {rr["run_id"]: attempts[rr["run_id"]] for rr in plan.runs if plan.irs[rr["run_id"]] is ir}
            durations_by_wf[key] = step_durations(ir, mine)
        per_run.append(run_seconds(ir, plan.plans[r["run_id"]], durations_by_wf[key]))
    mean = sum(per_run) / len(per_run)
    total = mean * math.ceil(len(per_run) / max(1, concurrency))
    if rate:
        total = max(total, len(per_run) / rate + max(per_run))
    return int(math.ceil(total))


@dataclass
class ReplayResult:
    request_id: str
    replayed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)     # already replayed by this request, or no longer terminal

    def to_dict(self) -> dict:
        return {"requestId": self.request_id, "replayed": len(self.replayed), "skipped": len(self.skipped),
                "runs": self.replayed}


async def _attempts_in_log_order(store: Store, run_ids: list[str]) -> dict[str, list[Attempt]]:
    """The current epoch's attempts of `run_ids`, each with the id of its first log event (`seq`), in log order
    (attempts without events last, by start): two reads matched here, linear in the attempts."""
    seqs = {(e["run_id"], e["step_id"], e["attempt"], e["epoch"], e["kind"]): e["seq"]
            for e in await store.fetch("replay_attempt_events", run_ids=run_ids)}
    out: dict[str, list[Attempt]] = {}
    for a in await store.fetch("replay_attempts", run_ids=run_ids):
        row = {**dict(a), "seq": seqs.get((a["run_id"], a["step_id"], a["attempt"], a["epoch"], a["kind"]))}
        out.setdefault(a["run_id"], []).append(Attempt.from_row(row))
    for rows in out.values():
        rows.sort(key=lambda x: (x.seq is None, x.seq or 0, x.started_at))
    return out


async def replay_one(store: Store, run: dict, plan: RunPlan, ir: WorkflowIR, request: str, cut: Cut,
                     to_version: int | None) -> bool:
    """Open the next epoch of one run, atomically: lock it, skip it if this request replayed it already (or it
    is not replayable any more), copy the reused results, make it pending. True when replayed now."""
    now = store.clock.now()
    async with store.transaction("replay_run") as conn:
        row = await conn.fetchrow("replay_lock", run_id=run["run_id"], request=request)
        if row is None or row["done"] or row["state"] not in REPLAYABLE:
            return False
        old, new = row["epoch"], row["epoch"] + 1
        await conn.fetchval("replay_copy_reused", run_id=run["run_id"], from_epoch=old, steps=list(plan.reused),
                            to_epoch=new, now=now)
        # the reused partitions are counted, not listed: a 100,000-item step must not grow the run's event
        reused = [st for st in plan.reused if split_part(st) is None]
        data = {"request": request, "epoch": new, "from_epoch": old, "reused": reused,
                "reused_partitions": len(plan.reused) - len(reused),
                "replayed": plan.replayed, **cut.describe(), "version": ir.version,
                "from_version": row["version"]}
        got = await conn.fetchval("replay_begin", run_id=run["run_id"], epoch=new, now=now, version=ir.version,
                                  deadline=now + timedelta(milliseconds=ir.deadline_ms),
                                  data=json.dumps(data, default=str))
        return got is not None


async def apply(store: Store, plan: ReplayPlan, *, rate: float | None = None,
                progress: Callable[[int, int], None] | None = None) -> ReplayResult:
    """Replay every planned run, paced at `rate` runs per second (None: as fast as the database takes them).
    Each run is its own transaction, so an interrupted call leaves every run either replayed or untouched."""
    out = ReplayResult(plan.request_id)
    loop = asyncio.get_running_loop()
    start = loop.time()
    total = len(plan.runs)
    for i, run in enumerate(plan.runs):
        if rate:
            due = start + i / rate
            delay = due - loop.time()
            if delay > 0:     # wall: --rate bounds the load on the database (and the far sides) in real seconds
                await asyncio.sleep(delay)
        rid = run["run_id"]
        ok = await replay_one(store, run, plan.plans[rid], plan.irs[rid], plan.request_id, plan.cut,
                              plan.to_version)
        (out.replayed if ok else out.skipped).append(rid)
        if progress is not None:
            progress(i + 1, total)
    return out
