"""Where a run of a code workflow stands against another version's code (§23, docs/deploys.md "Code workflows"): its
history of the current epoch replayed against the target version's workflow function with zero connector calls
(the replay gate, sdk/replay_gate.py). A replay that never contradicts the history is `compatible`: the run may move
to that version, a `blocked_version` run included (back to `pending`); one that does is `blocked` at the first
divergent step, with what the history has and what the code asked for. `run_moves.move_run` and the plan use it
for every code workflow, instead of the YAML step diff (deploy_diff.classify)."""

from __future__ import annotations

import json
from typing import Any

from ..compiler.deploy_diff import BLOCKED, COMPATIBLE, Move, Reason, RunPlan, Stand
from ..compiler.ir import WorkflowIR
from ..errors import A44Error
from .store.core import Store


async def code_history(store: Store, conn: Any, run: dict) -> dict:
    """The run's history as `runs export` writes it (attempts of the current epoch in log order, results loaded)."""
    attempts = []
    for a in map(dict, await conn.fetch("code_attempts_of_run", run_id=run["run_id"], epoch=run["epoch"])):
        a["result"] = store.load_result(a)
        attempts.append(a)
    raw = run.get("input")
    doc = {"run_id": run["run_id"], "workflow_id": run["workflow_id"], "version": run["version"],
           "state": run["state"], "epoch": run["epoch"], "input": json.loads(raw) if isinstance(raw, str) else raw,
           "idempotency_key": run.get("idempotency_key") or "replay"}
    return {"run": doc, "attempts": attempts}


async def classify_code(store: Store, conn: Any, run: dict, target: WorkflowIR, stand: Stand) -> RunPlan:
    """The plan of one open code run if it moved to `target`: compatible when the target's code replays its
    history, blocked at the first divergent step (or when the target's code cannot be loaded here)."""
    from ..sdk.loader import resolve
    from ..sdk.replay_gate import replay_history

    try:
        wf = resolve(target)
    except A44Error as err:     # not importable here, or its source changed since it was published
        return RunPlan(stand, BLOCKED, [Reason(None, BLOCKED, "code_unavailable", err.message, err.hint)], Move())
    got = await replay_history(wf, await code_history(store, conn, run))
    if not got.divergent:
        return RunPlan(stand, COMPATIBLE, [], Move())
    return RunPlan(stand, BLOCKED, [Reason(got.step, BLOCKED, "diverges", got.message or "the code diverges",
                                           "guard the change with step.patched(...) in the new version, or cancel "
                                           "the run")], Move())
