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
  one metric sum per (run, step, kind, status, duration bucket) instead of a delta row per attempt; their
  partition rows one `partition_states` upsert (0048); a lone one stays as it was.

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


# op -> the op that carries a run of them, and what makes two of them collide in one statement
GROUPS = {RECORD: "attempt_records", STATE: "partition_states"}


def _collision_key(kind: str, args: dict[str, Any]) -> tuple | None:
    # one upsert statement cannot touch a partition's row twice (superseded_dropped keeps such a pair only when
    # the earlier names a worker the later does not)
    return (args["step_id"], args["partition"]) if kind == STATE else None


def coalesce(ops: list[Op]) -> list[Op]:
    """`ops` with each run of records, and of partition rows (with only other PACKABLE ops between them), as one
    `attempt_records` / `partition_states` op in the place of its first member; a group of one stays as it was."""
    if sum(1 for kind, _ in ops if kind in GROUPS) < 2:
        return ops
    out: list[Op] = []
    groups: dict[str, tuple[list[dict[str, Any]], set]] = {}     # kind -> rows of its open group (placed), keys
    for kind, args in ops:
        if kind in GROUPS:
            open_ = groups.get(kind)
            key = _collision_key(kind, args)
            if open_ is not None and (key is None or key not in open_[1]):
                open_[0].append(args)
                if key is not None:
                    open_[1].add(key)
                continue
            rows = [args]
            groups[kind] = (rows, {key} if key is not None else set())
            out.append((GROUPS[kind], {"rows": rows}))
            continue
        if kind not in PACKABLE:
            groups.clear()
        out.append((kind, args))
    singles = {v: k for k, v in GROUPS.items()}
    return [(singles[kind], op["rows"][0]) if kind in singles and len(op["rows"]) == 1 else (kind, op)
            for kind, op in out]
