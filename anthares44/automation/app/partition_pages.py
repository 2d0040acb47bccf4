"""A run's partitions one page at a time (docs/partitions.md, "Fan-out over items"): `partitions RUN`, the REST
`GET /v1/automation/partitions/RUN?cursor=` and the console's grid read a page in plan order after a cursor (the
step and ordinal of the last row shown), by the index run_partitions_order_idx: a page costs the same whether the
run has 10 partitions or 100,000. The page says how many the run has in all (the plans' counts) and how many
failed for good (the partial index run_partitions_failed_idx: the cost follows the failed ones).
"""

from __future__ import annotations

import re

from ..errors import E_INVALID_ARGUMENT, A44Error
from .views import partition_view

_CURSOR = re.compile(r"(\d{1,9})_([A-Za-z0-9_-]{1,200})")


def encode(row: dict) -> str:
    """The position after `row`: its ordinal, then its step id (`12_load`)."""
    return f"{row['ordinal']}_{row['step_id']}"


def decode(cursor: str) -> tuple[str, int]:
    m = _CURSOR.fullmatch(cursor)
    if m is None:
        # the error InvalidArgument (app/automation.py) raises, without importing the module that imports this one
        raise A44Error(E_INVALID_ARGUMENT, f"bad partitions cursor {cursor!r}", hint="follow the page's `next` value")
    return m.group(2), int(m.group(1))


async def run_page(store, project: str, run_id: str, *, state: str | None, partition: str | None,
                   step: str | None, limit: int, cursor: str | None) -> dict:
    """{partitions, next, total, failed}: up to `limit` partitions of `run_id` after `cursor`, in plan order."""
    after_step, after_ordinal = decode(cursor) if cursor else (None, None)
    failed = state in ("failed", "timeout")         # "which failed": the partial index, not the run's rows
    rows = await store.fetch("partition_failed_page" if failed else "partition_page", project=project,
                             run_id=run_id, after_step=after_step, after_ordinal=after_ordinal, state=state,
                             partition=partition, step=step, limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    totals = await store.fetchrow("partition_totals_of_run", run_id=run_id)
    return {"partitions": [partition_view(dict(r)) for r in rows],
            "next": encode(rows[-1]) if more and rows else None,
            "total": totals["total"], "failed": totals["failed"]}
