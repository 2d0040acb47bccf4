"""A fan-out step's partitions: their keys (from a CEL list or a date range, docs/partitions.md) and the driving of
one step's partitions inside a visit: which partition starts next (at most `concurrency` in flight), and how the
step ends once every partition is final (results in partition order; `onPartitionFailure` decides what failed
partitions mean).

A partition is a `PartProgress`: its attempts are step_attempts rows with step_id `step[partition]`, so they go
through the same start/finish/retry/lease-expiry path as a step's, under the same run lease.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ...errors import E_EXPR_EVAL, E_PARTITIONS_FAILED, E_PARTITIONS_INVALID, A44Error
from .. import evaluation
from .progress import PartProgress, StepProgress

if TYPE_CHECKING:
    from .interpreter import RunDriver
    from .journal import Batch

MAX_PARTITIONS = 10_000
DAY_MS = 86_400_000
KEY_EVAL_TIMEOUT_S = 10.0


def _key(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


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
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def range_keys(start: Any, end: Any, every_ms: int, step_id: str) -> list[str]:
    """Keys from `start` to `end` inclusive, one every `every_ms`: `YYYY-MM-DD` when both ends are dates and the
    step is whole days, ISO date-times otherwise."""
    lo, hi = _moment(start, "from", step_id), _moment(end, "to", step_id)
    dates = not isinstance(lo, datetime) and not isinstance(hi, datetime) and every_ms % DAY_MS == 0
    if not dates:
        lo, hi = (m if isinstance(m, datetime) else datetime(m.year, m.month, m.day, tzinfo=timezone.utc)
                  for m in (lo, hi))
    step, keys, cur = timedelta(milliseconds=every_ms), [], lo
    while cur <= hi:
        if len(keys) == MAX_PARTITIONS:
            raise A44Error(E_PARTITIONS_INVALID, f"step {step_id} would have more than {MAX_PARTITIONS} "
                                                 f"partitions", step_id=step_id)
        keys.append(cur.isoformat())
        cur += step
    return keys


def list_keys(value: Any, step_id: str) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise A44Error(E_PARTITIONS_INVALID, f"foreach of step {step_id} gave {type(value).__name__}, not a list",
                       step_id=step_id)
    keys = [_key(v) for v in value]
    if len(keys) > MAX_PARTITIONS:
        raise A44Error(E_PARTITIONS_INVALID, f"step {step_id} has {len(keys)} partitions (at most "
                                             f"{MAX_PARTITIONS})", step_id=step_id)
    seen: set[str] = set()
    for k in keys:
        if k in seen:
            raise A44Error(E_PARTITIONS_INVALID, f"foreach of step {step_id} lists partition {k!r} twice",
                           step_id=step_id, hint="partition keys identify partitions: make them unique")
        seen.add(k)
    return keys


class FanOut:
    """The partitions of fan-out steps within one visit of a run."""

    def __init__(self, driver: "RunDriver"):
        self.d = driver

    async def keys(self, sp: StepProgress) -> list[str]:
        """The step's partition keys (the CEL sees what an `if:` sees; it is re-evaluated on every visit, so it
        must depend on the run only: input, earlier steps, trigger)."""
        node, eng = sp.node, self.d.engine
        spec = node.partitions
        scope = self.d.cel_scope(node.id)

        async def ev(expr):
            try:
                return await evaluation.evaluate(eng.program(node, expr), scope, KEY_EVAL_TIMEOUT_S)
            except A44Error:
                raise
            except Exception as exc:  # EvalError and friends: the expression is at fault
                raise A44Error(E_EXPR_EVAL, f"partitions of step {node.id} ({expr.cel}) failed: {exc}",
                               step_id=node.id) from None

        if spec.foreach is not None:
            return list_keys(await ev(spec.foreach), node.id)
        return range_keys(await ev(spec.range_from), await ev(spec.range_to), spec.every_ms, node.id)

    async def advance(self, b: "Batch", sp: StepProgress, now: datetime, dues: list, busy: set[str],
                      starts: list) -> bool:
        """Start what may start of step `sp`'s partitions; end the step when all are final. True when the step
        ended or a partition ran on the spot (successors or other partitions may be ready)."""
        p, node = self.d.p, sp.node
        parts = p.fanout.get(node.id)
        if parts is None:
            try:
                keys = await self.keys(sp)
            except A44Error as err:
                p.add(b.record(node.id, sp.next_attempt, "action", "failed", now, error=err))
                return True
            parts = p.plan(node.id, keys)
            for pp in parts:
                self.d.note_partition(b, pp, now)
        prefix = node.id + "["
        in_flight = sum(1 for k in busy if k.startswith(prefix))
        changed = False
        for pp in parts:
            if in_flight >= node.partitions.concurrency:
                break
            if pp.key in busy or pp.done or pp.state == "failed":
                continue
            if pp.state == "retry" and now < pp.last.retry_at:
                dues.append((pp.last.retry_at, "waiting"))
                continue
            if self.d.engine.inline(node):
                await self.d.run_inline(b, pp, now)
                changed = True
                continue
            a = b.start(pp.key, pp.next_attempt, "action", now)
            p.add(a)
            self.d.note_partition(b, pp, now)
            busy.add(pp.key)
            starts.append((a, pp))
            in_flight += 1
        if in_flight == 0 and all(pp.done or pp.state == "failed" for pp in parts):
            self._end(b, sp, parts, now)
            return True
        return changed

    def _end(self, b: "Batch", sp: StepProgress, parts: list[PartProgress], now: datetime) -> None:
        p, node = self.d.p, sp.node
        failed = [pp for pp in parts if pp.state == "failed"]
        if failed and node.partitions.on_failure != "partial":
            err = failure(node.id, failed, len(parts))
            p.add(b.record(node.id, sp.next_attempt, "action", "failed", now, error=err))
            return
        a = b.record(node.id, sp.next_attempt, "action", "succeeded", now, result=[pp.output for pp in parts])
        p.add(a)
        p.finished(a)


def failure(step_id: str | None, failed: list[PartProgress], total: int | None = None) -> A44Error:
    """E_PARTITIONS_FAILED naming each failed partition and why (the `partial` run's record)."""
    listed = [{"step": pp.node.id, "partition": pp.partition, "state": pp.shown, "error_code": pp.last.error_code,
               "error_message": pp.last.error_message} for pp in failed]
    names = ", ".join(f"{f['step']}[{f['partition']}] ({f['error_code']})" for f in listed)
    of = f" of {total}" if total is not None else ""
    return A44Error(E_PARTITIONS_FAILED, f"{len(failed)}{of} partition(s) failed after their retries: {names}",
                    step_id=step_id, details={"failed_partitions": listed},
                    hint="a44 automation replay RUN --failed-partitions runs exactly those again; "
                         "a44 automation runs skip RUN --partition P --reason ... skips one for good")
