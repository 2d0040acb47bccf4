"""Creating a run inside an ingestion transaction, with the store's `run_create` statement (claim the idempotency
key, insert the pending run, log it), so the envelope, the delivery and the run commit together."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from ...errors import E_DB, E_TEMPLATE, E_TEMPLATE_LIMIT, A44Error
from ..store.core import IDEMPOTENCY_WINDOW, RUN_WALL_CLOCK_LIMIT
from ..store.results import encode_json
from ..ulid import new_run_id


class Created(NamedTuple):
    run_id: str | None       # None: the workflow has no published version
    created: bool
    key_age_seconds: float


async def create_run_in(conn, project: str, workflow_id: str, version: int | None, input: Any, key: str, *,
                        trigger_id: str | None, event_id: str | None, partition_key: str | None, queue: str | None,
                        now: datetime, run_id: str | None = None) -> Created:
    run_id = run_id or new_run_id(now)
    row = await conn.fetchrow("run_create", project=project, workflow_id=workflow_id, version=version, run_id=run_id,
                              input=encode_json(input), key=key, trigger_id=trigger_id, partition_key=partition_key,
                              queue=queue, now=now, window=IDEMPOTENCY_WINDOW, deadline=now + RUN_WALL_CLOCK_LIMIT,
                              event_id=event_id)
    if row["version"] is None:
        return Created(None, False, 0.0)
    if row["created_run_id"] is not None:
        return Created(run_id, True, 0.0)
    held = await conn.fetchrow("idempotency_key_get", project=project, key=key)
    if held is None:  # pragma: no cover - the holder vanished between two statements
        raise A44Error(E_DB, f"idempotency key {key!r} changed hands; try again")
    return Created(held["run_id"], False, max(0.0, (now - held["created_at"]).total_seconds()))


async def workflow_partition_key(workflow_ir: dict | None, input: Any, trigger: dict) -> str | None:
    """The workflow's `concurrency.partitionKey` rendered over the run input (E_TEMPLATE when it cannot be)."""
    spec = ((workflow_ir or {}).get("concurrency") or {}).get("partition_key")
    if spec is None:
        return None
    return await render_key(spec, input, trigger, "the workflow's partition key")


async def render_key(spec: Any, input: Any, trigger: dict, what: str) -> str | None:
    """A partition key template over the input, rendered off the event loop within the ingestion time limit."""
    from .. import evaluation
    from ..render import make_scope

    try:
        value = await evaluation.render(spec, make_scope(input=input, trigger=trigger),
                                        evaluation.INGESTION_TIMEOUT_S)
    except A44Error as exc:
        code = exc.code if exc.code == E_TEMPLATE_LIMIT else E_TEMPLATE
        raise A44Error(code, f"{what} cannot be rendered from this input: {exc.message}") from None
    return None if value is None or value == "" else str(value)
