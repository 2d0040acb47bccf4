"""Durations and rates typed on the command line or passed to the API: `48h`, `60s`, `7d`, `1h30m`, `250ms`;
`20/s`, `600/min`; and `reconnect_delay`, the one backoff of a loop whose database or daemon went away.

One parser of each for every layer. The compiler's YAML `Duration` type (compiler/models/types.py) adds its own
rules on top of `parse_duration` (no bare numbers, at most 72 h, the span of a run); a listing window such as
`--since 30d` may be longer. A bare number in a string is refused: the unit is the point. Nothing is longer than
MAX_DURATION, so `now - age` and `now + age` stay inside the calendar (a `?since=99999999d` is an answer, not a
crash).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

# the one grammar: whole numbers of each unit, largest first, each unit at most once (`1h30m`, `2m500ms`, `7d`)
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")
DURATION_PATTERN = r"^(?=\d)(\d+d)?(\d+h)?(\d+m(?!s))?(\d+s)?(\d+ms)?$"   # the same, for JSON Schema
_UNIT_MS = (86_400_000, 3_600_000, 60_000, 1_000, 1)
MAX_DURATION = timedelta(days=36_500)


def duration_ms(text: str) -> int:
    """`'1h30m'` -> 5_400_000. Raises ValueError with a message that shows the accepted forms."""
    s = text.strip() if isinstance(text, str) else ""
    m = _DURATION.match(s)
    if not s or m is None or not any(m.groups()):
        raise ValueError(f"{text!r} is not a duration; use a number with a unit: 250ms, 60s, 15m, 48h, 7d")
    return sum(int(g) * unit for g, unit in zip(m.groups(), _UNIT_MS) if g)


def parse_duration(text: str | int | float | timedelta) -> timedelta:
    """`'48h'` -> timedelta(hours=48). Numbers are seconds (for the Python API); strings need a unit.
    Raises ValueError with a message that shows the accepted forms."""
    if isinstance(text, timedelta):
        return text
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"duration {text} is negative")
        return _capped(text, float(min(text, 2 * MAX_DURATION.total_seconds())) * 1000)
    return _capped(text, duration_ms(str(text)))


def _capped(text: object, milliseconds: float) -> timedelta:
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


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*(s|sec|second|m|min|minute|h|hour))?\s*$")
_PER = {None: 1, "s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}


def parse_rate(rate: str | float | int | None) -> float | None:
    """`20/s`, `600/m`, `600/min`, `5` (per second) -> events per second; None = unlimited. Raises ValueError for
    anything else, and for a rate that is not a positive finite number."""
    if rate is None:
        return None
    if isinstance(rate, (int, float)) and not isinstance(rate, bool):
        value = float(rate)
    else:
        m = _RATE.match(str(rate))
        if not m:
            raise ValueError(f"invalid rate {rate!r}; use a number per unit: 20/s, 600/min, 3600/h")
        value = float(m.group(1)) / _PER[m.group(2)]
    if not value > 0 or math.isinf(value):
        raise ValueError(f"the rate must be positive, got {rate!r}")
    return value


RECONNECT_FIRST_S, RECONNECT_MAX_S = 0.4, 5.0


def reconnect_delay(failures: int) -> float:
    """Seconds to wait after `failures` failed tries in a row (1, 2, ...): doubling from 0.4 s, at most 5 s. Short
    enough that a restarted database is back in work at once, long enough that a dead one is not hammered."""
    return min(RECONNECT_FIRST_S * 2.0 ** (max(failures, 1) - 1), RECONNECT_MAX_S)
