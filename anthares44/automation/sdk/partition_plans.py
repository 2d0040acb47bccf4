"""`ctx.partitions` of a code workflow: the twin of a YAML `since: lastSuccess` range (docs/partitions.md).

    days = await ctx.partitions.since_last_success("load-day", every="1d", initial="2026-07-01")
    await step.map("load-day", days, load)

The plan is the recorded step `<name>.plan`: its first execution asks the host (the engine) for the keys of
`name` this workflow has not processed yet, up to `to` (default: the day before the run's logical date), and the
host records them with the step, under the same lock and check as a YAML plan; every later visit and replay gets
the recorded list back, whatever other runs did since.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..durations import parse_duration

if TYPE_CHECKING:
    from .core import Execution

MAX_PLAN = 10_000
DEFAULT_MAX = 366


def _iso(value: Any, what: str) -> str:
    text = value.isoformat() if isinstance(value, (date, datetime)) else value
    if not isinstance(text, str):
        raise ValueError(f"{what} must be an ISO date or date-time, not {type(value).__name__}")
    try:
        (date if len(text) == 10 else datetime).fromisoformat(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not an ISO date (2026-07-01) or date-time") from None
    return text


def plan_spec(every: Any, initial: Any, to: Any, most: int) -> dict:
    """The plan's arguments as recorded (what decided the keys); a malformed one is the caller's bug."""
    ms = int((every if isinstance(every, timedelta) else parse_duration(str(every))).total_seconds() * 1000)
    if ms <= 0:
        raise ValueError("every must be a positive duration, e.g. '1d'")
    if not isinstance(most, int) or not 1 <= most <= MAX_PLAN:
        raise ValueError(f"max must be an integer from 1 to {MAX_PLAN}")
    return {"since": "last_success", "every_ms": ms, "initial": _iso(initial, "initial"),
            "to": None if to is None else _iso(to, "to"), "max": most}


class Partitions:
    def __init__(self, execution: Execution):
        self._x = execution

    async def since_last_success(self, name: str, *, initial: Any, every: Any = "1d", to: Any = None,
                                 max: int = DEFAULT_MAX) -> list[str]:
        """The partition keys of `step.map(name, ...)` this workflow has not processed (success or skipped) in
        any run, from `initial` (while nothing has) to `to` (default: the day before the run's logical date),
        without keys another unfinished run owns; decided once per run and recorded as step `<name>.plan`."""
        x = self._x
        spec = plan_spec(every, initial, to, max)
        plan_id = f"{name}.plan"
        log = x._enter(plan_id)
        last = log.last
        if last is None or last.status != "succeeded":
            last = await x.host.plan(plan_id, name, spec, log.next_attempt)
            log.actions.append(last)
        return x._done(plan_id, list(last.result), None)
