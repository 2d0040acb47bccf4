"""A run's tree of child workflows (§21, docs/children.md): `a44 automation runs tree RUN`, `GET
/v1/automation/runs/{id}/tree`. From any run of a tree it answers the whole tree, from its root: each run with
its workflow, version, state, parent, the parent's step that started it, its depth and how the parent waits.

    doc = await run_tree(auto, "run_01J9...")   # {"root_run_id", "runs": [{run_id, parent_run_id, ...}, ...]}
"""

from __future__ import annotations

from typing import Any

MAX_TREE_RUNS = 10_000      # a tree is at most 8 deep; a fan-out of children wider than this is cut (`truncated`)


async def run_tree(auto: Any, run_id: str) -> dict:
    """{root_run_id, run_id, runs: [...], truncated}; E_RUN_NOT_FOUND when `run_id` is not in the project."""
    await auto.store.get_run(run_id, auto.project)      # E_RUN_NOT_FOUND with its hint
    rows = [dict(r) for r in await auto.store.fetch("runs_tree", run_id=run_id, project=auto.project)]
    runs = [{"run_id": r["run_id"], "parent_run_id": r["parent_run_id"], "step_id": r["step_id"],
             "kind": r["kind"], "depth": r["depth"], "wait": r["wait"], "on_parent_cancel": r["on_parent_cancel"],
             "workflow_id": r["workflow_id"], "version": r["version"], "state": r["state"],
             "error_code": r["error_code"], "created_at": r["created_at"], "started_at": r["started_at"],
             "finished_at": r["finished_at"]} for r in rows[:MAX_TREE_RUNS]]
    return {"root_run_id": runs[0]["run_id"] if runs else run_id, "run_id": run_id, "runs": runs,
            "truncated": len(rows) > MAX_TREE_RUNS}
