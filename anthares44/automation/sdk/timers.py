"""When a code workflow's durable sleep is due (§19, docs/timers.md): `step.sleep(id, "1mo", tz=...)` counts a span
in the wall time of a zone (calendar units `y mo w d`, then `h m s ms` elapsed), `step.sleep_until(id, instant)`
ends at an aware instant. Computed once, when the sleep opens; the engine stores it (engine/code_visit.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ..calendar import DEFAULT_DST_POLICY, CalendarError, Span, due_for, parse_instant, parse_span
from ..errors import E_SLEEP_INVALID, A44Error


def due_for_duration(opened_at: datetime, duration: Any, tz: str | None = None,
                     dst_policy: str | None = None) -> datetime:
    """`duration` (a span text such as `30s` or `1mo2d`, seconds, or a timedelta) after `opened_at`."""
    try:
        if isinstance(duration, timedelta):
            span = Span(ms=round(duration.total_seconds() * 1000))
        elif isinstance(duration, (int, float)) and not isinstance(duration, bool):
            span = Span(ms=round(duration * 1000))
        else:
            span = parse_span(duration)
        return due_for(opened_at, span, tz or "UTC", dst_policy or DEFAULT_DST_POLICY)
    except CalendarError as exc:
        raise ValueError(f"step.sleep: {exc}") from None


def due_at_instant(step_id: str, instant: Any) -> datetime:
    """The aware instant `instant` (ISO 8601 text with its offset, or an aware datetime), in UTC; A44Error
    E_SLEEP_INVALID for a naive or unparseable one (the step fails for good)."""
    try:
        if isinstance(instant, datetime):
            if instant.tzinfo is None or instant.utcoffset() is None:
                raise CalendarError(f"{instant.isoformat()} has no UTC offset")
            return instant.astimezone(UTC)
        return parse_instant(instant).astimezone(UTC)
    except CalendarError as exc:
        raise A44Error(E_SLEEP_INVALID, f"step.sleep_until {step_id}: {exc}", step_id=step_id) from None
