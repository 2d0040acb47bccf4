"""Moving one open run to another version of its workflow (§23, docs/deploys.md), in one transaction.

The run's row is locked first (`FOR UPDATE SKIP LOCKED`): a row another transaction holds (a worker committing a
step, another migrate moving it) is `busy`, and a run whose lease a worker holds (even an expired one: its holder
may still commit under it) is `held`; both are left alone and tried again by the caller. Holding the row lock
with the lease free is the move's lease: no worker can claim the run until the move commits, and the engine
reads the new version at its next claim. Under the lock the run is classified again from its attempts as they
are now (compiler/deploy_diff.py), so a run that advanced since the plan is judged by where it stands; then the
move writes, all or nothing: renamed step ids in what the engine reads to rebuild the run's progress, new steps
before the frontier recorded skipped (`addedBeforeFrontier: skip`), outputs recomputed (`migrate: outputs`),
`runs.version`, and the log entry `run_version_changed` with the mapping, who and why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..compiler.deploy_diff import BLOCKED, RunPlan, classify, stand_of
from ..compiler.ir import WorkflowIR
from .code_moves import classify_code
from .store.core import Store
from .store.results import encode_json

MOVED, WOULD_MOVE, ALREADY, FINISHED, BUSY, HELD = "moved", "would_move", "already", "finished", "busy", "held"
REEXECUTE_REFUSED = "reexecute_refused"
OUTPUT_ROOTS = {"output", "input"}


@dataclass
class MoveResult:
    run_id: str
    outcome: str                          # moved | would_move | blocked | reexecute_refused | already | busy ...
    from_version: int | None = None
    plan: RunPlan | None = None
    detail: str | None = None
    event_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"run_id": self.run_id, "outcome": self.outcome, "from": self.from_version,
                             "detail": self.detail}
        if self.plan is not None:
            d.update({"class": self.plan.outcome, "reasons": [r.to_dict() for r in self.plan.reasons],
                      "first_difference": self.plan.first_difference, "move": self.plan.move.to_dict(),
                      "reexecute": list(self.plan.move.reexecute)})
        return d


def _attempts(raw: Any) -> list[tuple[str, str, str]]:
    rows = json.loads(raw) if isinstance(raw, str) else (raw or [])
    return [(r[0], r[1], r[2]) for r in rows]


async def move_run(store: Store, project: str, run_id: str, target: WorkflowIR, irs: dict[int, WorkflowIR], *,
                   at: datetime, by: str, why: str | None, dry_run: bool = False, allow_reexecute: bool = False,
                   only_compatible: bool = False) -> MoveResult:
    """Classify run `run_id` under its row lock and, unless `dry_run` or blocked, move it to `target`. `irs`: the
    stored IRs by version (a missing one is loaded). `only_compatible`: move only a run that needs no mapping
    (`versioning: auto-upgrade`)."""
    async with store.transaction("run_move") as conn:
        row = await conn.fetchrow("run_move_lock", run_id=run_id, project=project, now=at)
        if row is None:
            return MoveResult(run_id, BUSY, detail="another transaction holds the run (a worker's commit or "
                                                   "another migrate): tried again")
        version = row["version"]
        if row["state"] in ("succeeded", "partial", "failed", "compensation_failed", "cancelled"):
            return MoveResult(run_id, FINISHED, version, detail=f"the run ended {row['state']}")
        if version == target.version:
            return MoveResult(run_id, ALREADY, version, detail=f"already on v{version}")
        if row["lease_owner"] is not None:
            return MoveResult(run_id, HELD, version, detail=f"worker {row['lease_owner']} holds the run's lease")
        old = irs.get(version)
        if old is None:
            from ..compiler.ir import load_workflow_ir
            doc = await conn.fetchval("version_ir", project=project, workflow_id=target.workflow_id, version=version)
            old = irs[version] = load_workflow_ir(json.loads(doc) if isinstance(doc, str) else doc)
        stand = stand_of(run_id, version, row["state"], _attempts(row["attempts"]))
        if target.kind == "code":       # judged by replaying its history against the target's code
            plan = await classify_code(store, conn, dict(row), target, stand)
        else:
            plan = classify(old, target, stand, allow_reexecute=allow_reexecute)
        if plan.outcome == BLOCKED or (only_compatible and plan.outcome != "compatible"):
            return MoveResult(run_id, plan.outcome, version, plan)
        if dry_run:
            return MoveResult(run_id, WOULD_MOVE, version, plan)
        move = plan.move
        olds, news = list(move.renames), list(move.renames.values())
        if olds:
            await conn.fetchval("run_move_rename_steps", run_id=run_id, olds=olds, news=news, now=at)
        for step_id in move.skip_added:
            await conn.execute("run_move_skip_step", run_id=run_id, step_id=step_id, project=project,
                               epoch=row["epoch"], now=at)
        for step_id, expr in move.outputs.items():
            await _recompute_output(store, conn, run_id, step_id, expr.cel, row, at)
        data = {"from": version, "to": target.version, "class": plan.outcome, "by": by, "reason": why,
                "mapping": move.to_dict(), "reasons": [r.to_dict() for r in plan.reasons]}
        if row["state"] == "blocked_version":   # the target's code replays its history: due again at once
            await conn.fetchval("run_move_unblock", run_id=run_id, now=at)
        message = f"moved from v{version} to v{target.version} by {by}" + (f": {why}" if why else "")
        event_id = await conn.fetchval("run_move_version", run_id=run_id, to=target.version, olds=olds, news=news,
                                       message=message, data=encode_json(data), now=at)
    return MoveResult(run_id, MOVED, version, plan, event_id=event_id)


async def _recompute_output(store: Store, conn, run_id: str, step_id: str, cel: str, row, at: datetime) -> None:
    """`migrate: outputs`: the step's last succeeded result replaced by the expression over it."""
    from ..grammar import compile_expression
    from . import evaluation

    last = await conn.fetchrow("run_move_last_output", run_id=run_id, step_id=step_id, epoch=row["epoch"], now=at)
    if last is None:
        return
    output = store.load_result(dict(last))
    program = compile_expression(cel, roots=OUTPUT_ROOTS, expect_bool=False).program
    if program is None:     # pragma: no cover - lint refused it at publish
        return
    inp = json.loads(row["input"]) if isinstance(row["input"], str) else row["input"]
    value = await evaluation.evaluate(program, {"output": output, "input": inp}, evaluation.INGESTION_TIMEOUT_S)
    await conn.execute("run_move_set_output", run_id=run_id, step_id=step_id, epoch=row["epoch"],
                       attempt=last["attempt"], result=encode_json(value), now=at)
