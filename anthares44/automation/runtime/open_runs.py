"""A workflow's open runs as a deploy sees them (docs/deploys.md): the stored IR of each version that still has
open runs, and those runs page by page with where each stands (its attempts of the current epoch). Read by
`publish --plan` (app/deploy_plan.py) and `runs migrate` (app/run_migration.py); nothing here writes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from ..compiler.ir import WorkflowIR, load_workflow_ir
from ..errors import E_WORKFLOW_NOT_FOUND, A44Error
from .store.core import Store

PAGE = 1000


async def open_runs(store: Store, project: str, workflow_id: str, versions: list[int]) -> AsyncIterator[dict]:
    """Every open run of `workflow_id` on `versions`, by run id, page by page, with its attempts (and what a code
    workflow's replay gate needs of the run: its epoch, input and idempotency key)."""
    after = ""
    while True:
        page = await store.fetch("open_runs_page", project=project, workflow_id=workflow_id, versions=versions,
                                 after=after, limit=PAGE, now=store.clock.now())
        for r in page:
            yield dict(r)
        if len(page) < PAGE:
            return
        after = page[-1]["run_id"]


def attempts_of(row: dict) -> list[tuple[str, str, str]]:
    """(step_id, kind, status) of a run's attempts, in start order, from an `open_runs` row."""
    raw = row["attempts"]
    rows = json.loads(raw) if isinstance(raw, str) else raw
    return [(a[0], a[1], a[2]) for a in rows]


async def stored_irs(store: Store, project: str, workflow_id: str) -> tuple[dict[int, WorkflowIR], dict[int, int]]:
    """The stored IR of every version of `workflow_id` that has open runs, and those versions' open run counts."""
    irs, open_counts = {}, {}
    for v in await store.fetch("versions_open_runs", project=project, workflow_id=workflow_id,
                               now=store.clock.now()):
        if v["open_runs"]:
            doc = await store.fetchval("version_ir", project=project, workflow_id=workflow_id, version=v["version"])
            irs[v["version"]] = load_workflow_ir(doc)
            open_counts[v["version"]] = v["open_runs"]
    return irs, open_counts


async def target_ir(store: Store, project: str, workflow_id: str, version: int) -> WorkflowIR:
    """The stored IR of one published version; E_WORKFLOW_NOT_FOUND when it is not published."""
    doc = await store.fetchval("version_ir", project=project, workflow_id=workflow_id, version=version)
    if doc is None:
        raise A44Error(E_WORKFLOW_NOT_FOUND, f"{workflow_id} version {version} is not published in {project}",
                       hint="publish it first; `a44 automation versions WF` lists the versions")
    return load_workflow_ir(doc)
