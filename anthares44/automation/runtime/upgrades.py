"""`versioning: auto-upgrade` after the publish (§23, docs/deploys.md "Auto-upgrade"): the publish moves the
compatible open runs it can lock; a run a worker held then is moved here, by the daemon's sweep, the next time no
worker holds it (between its steps: a sleep, a wait, a retry's backoff, a release). Each candidate is judged under
its row lock by run_moves.move_run (only a `compatible` run moves, audited `by: auto-upgrade`); a run judged not
compatible for the newest version gets a `run_version_kept` event naming it, so it is not judged again until a
newer version is published."""

from __future__ import annotations

import json
from datetime import datetime

from ..compiler.ir import WorkflowIR, load_workflow_ir
from .run_moves import MOVED, move_run
from .store.core import Store

BATCH = 100     # candidates judged per sweep (each a transaction of its own)
KEPT = ("blocked", "mappable", "reexecute_refused")


async def sweep(store: Store, now: datetime, limit: int = BATCH) -> int:
    """Move up to `limit` released runs of auto-upgrade workflows to their newest version; returns how many moved."""
    moved = 0
    irs: dict[tuple[str, str, int], WorkflowIR] = {}
    for c in await store.fetch("upgrade_candidates", limit=limit, now=now):
        key = (c["project_id"], c["workflow_id"], c["to_version"])
        if key not in irs:
            doc = await store.fetchval("version_ir", project=c["project_id"], workflow_id=c["workflow_id"],
                                       version=c["to_version"])
            irs[key] = load_workflow_ir(json.loads(doc) if isinstance(doc, str) else doc)
        result = await move_run(store, c["project_id"], c["run_id"], irs[key], {}, at=now, by="auto-upgrade",
                                why="versioning: auto-upgrade (after the publish)", only_compatible=True)
        if result.outcome == MOVED:
            moved += 1
        elif result.outcome in KEPT:
            await store.execute("upgrade_kept", run_id=c["run_id"], project=c["project_id"], to=c["to_version"],
                                outcome=result.outcome, now=now)
    return moved
