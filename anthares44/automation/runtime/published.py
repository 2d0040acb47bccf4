"""The project's published objects as `publish` settles references against them: queue, workflow and declared
connector ids (and the connectors' definitions, which a workflow's IR carries), and the storing of connector
files."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store.core import Store


async def published_objects(store: Store, project: str) -> tuple[set[str], set[str], dict[str, dict]]:
    """(queue ids, workflow ids, {connector id: definition}) published in `project`."""
    queues = {r["queue_id"] for r in await store.fetch("published_queue_ids", project=project)}
    workflows = {r["workflow_id"] for r in await store.fetch("published_workflow_ids", project=project)}
    connectors = {}
    for r in await store.fetch("published_connectors", project=project):
        d = r["definition"]
        connectors[r["connector_id"]] = json.loads(d) if isinstance(d, str) else d
    return queues, workflows, connectors


async def store_connectors(store: Store, project: str, connectors: list) -> list[tuple[str, str]]:
    """Upsert published declared connectors, each (validated model, mapping as written): the definition kept is
    the one written, validated again when a later publish reads it. Returns [(connector_id, outcome)]."""
    now = store.clock.now()
    out = []
    for model, written in connectors:
        outcome = await store.fetchval("connector_upsert", project=project, connector_id=model.id, type=model.type,
                                       definition=json.dumps(written, sort_keys=True, default=str), now=now)
        out.append((model.id, outcome))
    return out
