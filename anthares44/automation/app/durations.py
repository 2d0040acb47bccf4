"""Durations typed on the command line or passed to the API: `48h`, `60s`, `7d`, `1h30m`, `250ms`.

The compiler's `parse_duration` caps at 72 h (a run's span); a listing window such as `--since 30d` may be longer,
hence this small parser of its own. A bare number is refused: the unit is the point. Nothing is longer than
MAX_DURATION, so `now - age` and `now + age` stay inside the calendar (a `?since=99999999d` is an answer, not a crash).
"""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)")
MAX_DURATION = timedelta(days=36_500)


def parse_duration(text: str | int | float | timedelta) -> timedelta:
    """`'48h'` -> timedelta(hours=48). Numbers are seconds (for the Python API); strings need a unit.
    Raises ValueError with a message that shows the accepted forms."""
    if isinstance(text, timedelta):
        return text
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"duration {text} is negative")
        return _capped(text, float(min(text, 2 * MAX_DURATION.total_seconds())) * 1000)
    s = str(text).strip().lower()
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(f"{text!r} is not a duration; use a number with a unit: 250ms, 60s, 15m, 48h, 7d")
    return _capped(text, total)


def _capped(text, milliseconds: float) -> timedelta:
    if milliseconds > MAX_DURATION / timedelta(milliseconds=1):
        raise ValueError(f"duration {str(text)[:40]!r} is longer than {MAX_DURATION.days}d")
    return timedelta(milliseconds=milliseconds)


def format_seconds(seconds: float | None) -> str:
    """A short human duration: `120ms`, `12.3s`, `4m05s`, `2h03m`, `3d04h`; `-` for None."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    s = int(seconds)
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"
