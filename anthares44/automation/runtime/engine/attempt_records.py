"""Attempts written together travel as one operation (migration 0047): a batch's finished-at-once attempts
(`Batch.record`: a chunk of `pass` partitions, fanout.py) become one `attempt_records` op, which inserts them in
one statement, their attempt.finished events in one more, and one metric sum per (run, step, kind, status,
duration bucket) instead of a delta row per attempt.

Only the ops that write no event and read no attempt (a partition's row, its row counts) may sit between two
records of one group, so the log's events keep their order: the group takes the place of its first record. A
lone record stays an `attempt_record`, as it was."""

from __future__ import annotations

from typing import Any

Op = tuple[str, dict[str, Any]]

RECORD = "attempt_record"
# ops that neither write a run event nor read step_attempts: a record may move before them
NEUTRAL = frozenset({"partition_state", "step_rows_record"})


def coalesce(ops: list[Op]) -> list[Op]:
    """`ops` with each run of records (with only NEUTRAL ops between them) as one `attempt_records` op."""
    if sum(1 for kind, _ in ops if kind == RECORD) < 2:
        return ops
    out: list[Op] = []
    group: list[dict[str, Any]] | None = None       # the rows of the open group, already placed in `out`
    for kind, args in ops:
        if kind == RECORD:
            if group is None:
                group = [args]
                out.append(("attempt_records", {"rows": group}))
            else:
                group.append(args)
            continue
        if kind not in NEUTRAL:
            group = None
        out.append((kind, args))
    return [(RECORD, op["rows"][0]) if kind == "attempt_records" and len(op["rows"]) == 1 else (kind, op)
            for kind, op in out]
