"""The items of a `foreach` fan-out (docs/partitions.md, "Fan-out over items"): the list the CEL gave, each item's
partition key (`key:` evaluated over `item`, else the item itself when a string, other values as compact JSON),
checked once at plan time: at most MAX_ITEMS items, every key a non-null string, no key twice. Any breach refuses
the whole plan with E_PARTITIONS_INVALID naming the item's index, before a row is written.

The items are recorded once per (run, step) in `automation.partition_items` (migration 0038), never per attempt:
an attempt reads its item from the plan the visit holds in memory.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ...compiler.ir import MAX_ITEMS
from ...errors import E_EXPR_EVAL, E_PARTITIONS_INVALID, A44Error
from .. import evaluation

__all__ = ["MAX_ITEMS", "check_list", "item_keys", "item_lists", "plain_key", "stored"]

KEY_EVAL_TIMEOUT_S = 30.0      # the key expression over every item of the list, all together
MAX_KEY_CHARS = 1_000          # a key names a partition in ids (`step[key]`), URLs and the CLI: bounded


def plain_key(value: Any) -> str:
    """Today's key of an item without `key:`: a string is itself, anything else its compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def _refuse(step_id: str, message: str, hint: str | None = None) -> A44Error:
    return A44Error(E_PARTITIONS_INVALID, f"foreach of step {step_id}: {message}", step_id=step_id, hint=hint)


def check_list(value: Any, step_id: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise _refuse(step_id, f"gave {type(value).__name__}, not a list")
    if len(value) > MAX_ITEMS:
        raise _refuse(step_id, f"has {len(value)} items (at most {MAX_ITEMS:,})",
                      hint="split the list across runs, or fan out over child workflows that each take a slice")
    return list(value)


def _keys_with(program, items: list, scope: dict, step_id: str, deadline: float) -> list[Any]:
    """`key` over every item, in a worker thread (one hand-off for the whole list, not one per item)."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(program.evaluate({**scope, "item": item}, deadline=deadline))
        except Exception as exc:  # EvalError and friends: the expression (or the item) is at fault
            raise _refuse(step_id, f"key of item {i} ({program.text}) failed: {exc}") from None
    return out


async def item_keys(items: list, program, scope: dict, step_id: str) -> list[str]:
    """The partition key of each item, checked (unique, non-null strings of at most MAX_KEY_CHARS)."""
    if program is None:
        keys = [plain_key(v) for v in items]
    else:
        deadline = time.monotonic() + KEY_EVAL_TIMEOUT_S
        try:
            raw = await evaluation.off_loop(lambda: _keys_with(program, items, scope, step_id, deadline),
                                             KEY_EVAL_TIMEOUT_S, lambda: A44Error(
                E_EXPR_EVAL, f"the key of step {step_id} did not finish within {KEY_EVAL_TIMEOUT_S:g} s"))
        except A44Error:
            raise
        keys = []
        for i, k in enumerate(raw):
            if k is None:
                raise _refuse(step_id, f"item {i} has a null key ({program.text})",
                              hint="every item needs a key: filter the list, or key on another field")
            if not isinstance(k, str):
                raise _refuse(step_id, f"the key of item {i} is {type(k).__name__} {json.dumps(k, default=str)[:80]}, "
                                       f"not a string ({program.text})", hint=f"string({program.text})")
            keys.append(k)
    seen: dict[str, int] = {}
    for i, k in enumerate(keys):
        if len(k) > MAX_KEY_CHARS:
            raise _refuse(step_id, f"the key of item {i} has {len(k)} characters (at most {MAX_KEY_CHARS})")
        if "\x00" in k:         # PostgreSQL text cannot hold it (no input or IR can carry one; a CEL function might)
            raise _refuse(step_id, f"the key of item {i} holds a NUL character")
        first = seen.setdefault(k, i)
        if first != i:
            raise _refuse(step_id, f"items {first} and {i} have the same key {k[:80]!r}",
                          hint="partition keys identify partitions: make them unique (`key: item.id`)")
    return keys


def stored(keys: list[str], items: list) -> list[list]:
    """The [key, item] pairs of partition_items (item null when it is its own key: a string item, no `key:`)."""
    return [[k, None if isinstance(v, str) and v == k else v] for k, v in zip(keys, items)]


def item_lists(plans, rows) -> tuple[dict[str, list[str]], dict[str, list]]:
    """The recorded plans read back: step -> keys (a range's from `partition_plans.keys`, a `foreach`'s from
    its partition_items rows in order) and step -> items (`foreach` only)."""
    keys: dict[str, list[str]] = {r["step_id"]: r["keys"] for r in plans if r["keys"] is not None}
    items: dict[str, list] = {}
    for r in rows:
        keys.setdefault(r["step_id"], []).append(r["partition"])
        item = r["item"]
        items.setdefault(r["step_id"], []).append(r["partition"] if item is None else item)
    for r in plans:
        if r["keys"] is None:
            keys.setdefault(r["step_id"], [])
            items.setdefault(r["step_id"], [])
    return keys, items
