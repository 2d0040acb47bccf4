"""How a batch's operations are packed into its one statement (issue 32: rows and statements per partition). The
batch records what happened in order; before it is sent, three rewrites that change no outcome:

- a `partition_state` followed, in the same batch, by another of the same partition is dropped (the later one
  sets every column: a range plan's `pending` row and the row of the same partition run on the spot in the same
  transaction are one insert, not an insert and an update);
- a `partition_items` (a `foreach` plan's items and its pending rows, migration 0038) moves after the partition
  rows that follow it, so a partition that ended in the same batch is inserted once, final, and the plan's
  pending insert (`on conflict do nothing`) skips it;
- finished-at-once attempts (`Batch.record`: a chunk of `pass` partitions, fanout.py) become one
  `attempt_records` op (migration 0047): one INSERT of the attempts, one of their attempt.finished events, and
  one metric sum per (run, step, kind, status, duration bucket) instead of a delta row per attempt; a lone record
  stays an `attempt_record`, as it was.

Each rewrite moves or merges ops only across PACKABLE ones, which write no run event and read neither the
attempts nor the partition rows another op wrote, so the log's events keep their order and every op sees what it
saw before."""

from __future__ import annotations

from typing import Any

Op = tuple[str, dict[str, Any]]

RECORD = "attempt_record"
STATE = "partition_state"
ITEMS = "partition_items"
PACKABLE = frozenset({RECORD, STATE, "step_rows_record"})


def pack(ops: list[Op]) -> list[Op]:
    return coalesce(items_after_rows(superseded_dropped(ops)))


def superseded_dropped(ops: list[Op]) -> list[Op]:
    """Without each partition_state another of the same partition follows within the same run of PACKABLE ops."""
    if sum(1 for kind, _ in ops if kind == STATE) < 2:
        return ops
    later: dict[tuple[str, str], dict[str, Any]] = {}
    out: list[Op] = []
    for kind, args in reversed(ops):
        if kind not in PACKABLE:
            later.clear()
        elif kind == STATE:
            key = (args["step_id"], args["partition"])
            after = later.get(key)
            # the later row keeps this one's worker only when it names none itself (the upsert's coalesce)
            if after is not None and (args.get("worker_id") is None or after.get("worker_id") is not None):
                continue
            later[key] = args
        out.append((kind, args))
    out.reverse()
    return out


def items_after_rows(ops: list[Op]) -> list[Op]:
    """Each partition_items moved to the end of the run of PACKABLE ops that follows it."""
    if not any(kind == ITEMS for kind, _ in ops):
        return ops
    out: list[Op] = []
    held: list[Op] = []
    for op in ops:
        if op[0] == ITEMS:
            held.append(op)
            continue
        if held and op[0] not in PACKABLE:
            out.extend(held)
            held = []
        out.append(op)
    out.extend(held)
    return out


def coalesce(ops: list[Op]) -> list[Op]:
    """`ops` with each run of records (with only other PACKABLE ops between them) as one `attempt_records` op,
    in the place of its first record."""
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
        if kind not in PACKABLE:
            group = None
        out.append((kind, args))
    return [(RECORD, op["rows"][0]) if kind == "attempt_records" and len(op["rows"]) == 1 else (kind, op)
            for kind, op in out]
