"""A fan-out step's partition plan: the list of its partition keys, computed once at the step's first visit of a
run (docs/partitions.md, "The plan") and recorded in `automation.partition_plans` with the transition that
starts the step; later visits, a takeover and a replay read the recorded list back.

The keys come from a CEL list (`foreach`), a CEL range (`from` .. `to`), or a `since: lastSuccess` range: every
key from the earliest partition this step of this workflow has not processed in any run (success or skipped), or
`initial` while nothing has, to `to`, leaving out keys another unfinished run owns. A partition that failed stays
in the next runs' plans until one processes it (or a person skips it): the plan starts at the earliest key that
was planned by some run and never processed, else just after the last processed key.

The range expressions see what an `if:` sees plus `run.date` / `run.yesterday` (the run's logical date: its
schedule occurrence when a schedule started it, else its creation time, in the trigger's or workflow's time zone)
and `partitions.last_success` (the greatest processed key, or null).
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ...errors import E_EXPR_EVAL, E_PARTITIONS_INVALID, A44Error
from .. import evaluation
from .item_plan import check_list, item_keys

if TYPE_CHECKING:
    from ...compiler.ir import NodeIR, PartitionsIR
    from .visit import Visit

MAX_PARTITIONS = 10_000        # a range's keys (days, hours); a `foreach` takes up to item_plan.MAX_ITEMS items
DAY_MS = 86_400_000
KEY_EVAL_TIMEOUT_S = 10.0


def _moment(text: Any, what: str, step_id: str) -> date | datetime:
    if not isinstance(text, str):
        raise A44Error(E_PARTITIONS_INVALID, f"range {what} of step {step_id} gave {type(text).__name__}, not an "
                                             f"ISO date string", step_id=step_id)
    try:
        if len(text) == 10:
            return date.fromisoformat(text)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise A44Error(E_PARTITIONS_INVALID, f"range {what} of step {step_id} is {text!r}, not an ISO date "
                                             f"(2026-07-04) or date-time", step_id=step_id) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _instant(m: date | datetime) -> datetime:
    return m if isinstance(m, datetime) else datetime(m.year, m.month, m.day, tzinfo=UTC)


def range_keys(start: Any, end: Any, every_ms: int, step_id: str) -> list[str]:
    """Keys from `start` to `end` inclusive, one every `every_ms`: `YYYY-MM-DD` when both ends are dates and the
    step is whole days, ISO date-times otherwise."""
    lo, hi = _moment(start, "from", step_id), _moment(end, "to", step_id)
    dates = not isinstance(lo, datetime) and not isinstance(hi, datetime) and every_ms % DAY_MS == 0
    if not dates:
        lo, hi = _instant(lo), _instant(hi)
    step, keys, cur = timedelta(milliseconds=every_ms), [], lo
    while cur <= hi:
        if len(keys) == MAX_PARTITIONS:
            raise A44Error(E_PARTITIONS_INVALID, f"step {step_id} would have more than {MAX_PARTITIONS} "
                                                 f"partitions", step_id=step_id)
        keys.append(cur.isoformat())
        cur += step
    return keys


def source(spec: PartitionsIR) -> str:
    """The partition source as recorded with a plan: what decided the keys (not how many run at once)."""
    doc = {"foreach": spec.foreach and spec.foreach.cel, "from": spec.range_from and spec.range_from.cel,
           "to": spec.range_to and spec.range_to.cel, "every_ms": spec.every_ms, "since": spec.since,
           "initial": spec.initial, "max": spec.max, "key": spec.key and spec.key.cel}
    return json.dumps({k: v for k, v in doc.items() if v is not None}, sort_keys=True, separators=(",", ":"))


class PartitionHistory:
    """What other runs did with a step's partitions: processed (success or skipped) and owned (planned by a run
    that has not finished)."""

    def __init__(self, rows, step_id: str):
        self.done = {r["partition"] for r in rows if r["done"]}
        self.owned = {r["partition"] for r in rows if r["owned"] and not r["done"]}
        self.seen = {r["partition"] for r in rows}
        self.step_id = step_id

    def _at(self, key: str) -> datetime | None:
        try:
            return _instant(_moment(key, "key", self.step_id))
        except A44Error:
            return None             # a key of another source (a foreach over the same step id): not a day

    @property
    def last_success(self) -> str | None:
        dated = [(at, k) for k in self.done if (at := self._at(k)) is not None]
        return max(dated)[1] if dated else None

    def start(self, initial: str, every_ms: int) -> str:
        """The first key of the next plan: the earliest key planned before and never processed (a hole), else
        the one after the last processed key; never before `initial`."""
        last = self.last_success
        if last is None:
            return initial
        first = _instant(_moment(initial, "initial", self.step_id))
        last_at = self._at(last)
        holes = [(at, k) for k in self.seen - self.done if (at := self._at(k)) is not None and first <= at < last_at]
        if holes:
            return min(holes)[1]
        nxt = _moment(last, "key", self.step_id) + timedelta(milliseconds=every_ms)
        return nxt.isoformat() if _instant(nxt) >= first else initial


def logical_moment(triggers, row, fire_at: datetime | None) -> datetime:
    """The run's logical time in the time zone of its trigger (else the workflow's first zoned trigger, else
    UTC): the schedule occurrence that started it, else its creation."""
    from ..scheduling.occurrences import zone

    zoned = [t for t in triggers or () if t.tz]
    own = [t for t in zoned if t.id == row["trigger_id"]]
    tz = zone((own or zoned)[0].tz) if zoned else UTC
    return (fire_at or row["created_at"]).astimezone(tz)


def since_keys(history: PartitionHistory, initial: str, end: Any, every_ms: int, most: int, step_id: str) -> list[str]:
    """The keys of a since-last-success plan: from `history.start` to `end`, without those processed or owned
    by other runs; more than `most` is E_PARTITIONS_INVALID."""
    start = history.start(initial, every_ms)
    if _instant(_moment(end, "to", step_id)) < _instant(_moment(start, "from", step_id)):
        return []
    keys = [k for k in range_keys(start, end, every_ms, step_id) if k not in history.done and k not in history.owned]
    if len(keys) > most:
        raise A44Error(E_PARTITIONS_INVALID, f"step {step_id} would plan {len(keys)} partitions from {start} to "
                                             f"{end}, more than its max {most}", step_id=step_id,
                       hint="raise the range's `max`, or move `initial` closer")
    return keys


class Planner:
    """Computes the keys of a fan-out step (YAML) or a `ctx.partitions.since_last_success` (code) at its first
    visit; the caller records them."""

    def __init__(self, v: Visit):
        self.v = v

    async def _ev(self, node: NodeIR, expr, scope: dict) -> Any:
        try:
            return await evaluation.evaluate(self.v.program(node, expr), scope, KEY_EVAL_TIMEOUT_S)
        except A44Error:
            raise
        except Exception as exc:  # EvalError and friends: the expression is at fault
            raise A44Error(E_EXPR_EVAL, f"partitions of step {node.id} ({expr.cel}) failed: {exc}",
                           step_id=node.id) from None

    async def items(self, node: NodeIR, scope: dict) -> tuple[list[str], list]:
        """The keys and items of a `foreach` step (item_plan.py: at most 100,000, keys checked)."""
        spec = node.partitions
        items = check_list(await self._ev(node, spec.foreach, scope), node.id)
        program = self.v.program(node, spec.key) if spec.key is not None else None
        return await item_keys(items, program, scope, node.id), items

    async def keys(self, node: NodeIR, scope: dict) -> list[str]:
        """The keys of `node`'s range partitions; `scope` is what its `if:` would see (partitions add to it)."""
        spec = node.partitions
        history = await self.history(node.id)
        day = await self.logical_day()
        scope["run"] = {**scope["run"], "date": day.isoformat(),
                        "yesterday": (day - timedelta(days=1)).isoformat()}
        scope["partitions"] = {"last_success": history.last_success}

        async def ev(expr):
            return await self._ev(node, expr, scope)

        if spec.since is None:
            return range_keys(await ev(spec.range_from), await ev(spec.range_to), spec.every_ms, node.id)
        return since_keys(history, spec.initial, await ev(spec.range_to), spec.every_ms, spec.max, node.id)

    async def history(self, step_id: str) -> PartitionHistory:
        L = self.v.lease
        rows = await self.v.store.fetch("partition_history", project=L.project_id, workflow=L.workflow_id,
                                               step=step_id, run_id=L.run_id)
        return PartitionHistory(rows, step_id)

    async def logical_day(self) -> date:
        row, L = self.v.row, self.v.lease
        fire_at = None
        if row["trigger_id"] is not None:
            fire_at = await self.v.store.fetchval("partition_logical_time", project=L.project_id,
                                                  trigger=row["trigger_id"], run_id=L.run_id)
        return logical_moment(self.v.run.ir.triggers, row, fire_at).date()
