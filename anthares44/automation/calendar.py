"""Calendar time, pure: the due instant of a durable timer (§19) and the local-time rule schedules share (§11).

A timer's `for` may mix calendar units (`y`, `mo`, `w`, `d`), added in the local wall time of an IANA zone, with
fixed units (`h`, `m`, `s`, `ms`), added afterwards as elapsed time: `1mo` from 31 Jan 10:00 is 28/29 Feb 10:00
(month ends are clamped, a year is twelve months, so 29 Feb + 1y is 28 Feb), and `1d12h` is tomorrow at the same
wall time, then twelve hours more. A wall time that lands in a DST gap or fold resolves by `dstPolicy`, from the
same reading of zoneinfo as a schedule's nominal times (`classify`), to exactly one instant, because a timer
fires once:

| the local time is...             | skip-nonexistent / run-once               | run-twice                  |
|----------------------------------|-------------------------------------------|----------------------------|
| normal                           | that instant                              | that instant               |
| nonexistent (spring-forward gap) | shifted forward by the gap (fold=0)       | the same                   |
| ambiguous (fall-back fold)       | the first (earlier) instant               | the second (later) instant |

A schedule skips a nonexistent time; a timer cannot be skipped, so it ends where `run-once` would fire. Under
`run-twice` a schedule fires at both instants of a fold; a timer ends after the last of them.

`until` is an instant written with its offset (`2026-07-01T09:00:00-03:00`, or `Z`): a naive time would mean a
different instant in every zone, so it is refused, as is a bare date.
"""

from __future__ import annotations

import calendar as _stdlib_calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DST_POLICIES = ("skip-nonexistent", "run-once", "run-twice")
DEFAULT_DST_POLICY: Final = "skip-nonexistent"
CALENDAR_UNITS = ("y", "mo", "w", "d")
# calendar units then fixed ones, largest first, each at most once: `1mo`, `2w3d`, `1y6mo`, `1d12h`, `90s`
_SPAN = re.compile(r"^(?:(\d+)y)?(?:(\d+)mo)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?![so]))?(?:(\d+)s)?"
                   r"(?:(\d+)ms)?$")
SPAN_PATTERN = r"^(?=\d)(\d+y)?(\d+mo)?(\d+w)?(\d+d)?(\d+h)?(\d+m(?![so]))?(\d+s)?(\d+ms)?$"  # for JSON Schema
_FIXED_MS = {"h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}
# the longest a calendar unit can be: 31-day months, 366-day years, and an hour a DST change can add
LONGEST_MONTH, LONGEST_YEAR_DAYS, DST_MARGIN = timedelta(days=31), 366, timedelta(hours=1)


class CalendarError(ValueError):
    """A span, zone, policy or instant that cannot be used; the message says what is accepted."""


@dataclass(frozen=True)
class Span:
    """How long a timer waits: `months` and `days` in local wall time, then `ms` of elapsed time."""
    months: int = 0
    days: int = 0
    ms: int = 0

    @property
    def is_fixed(self) -> bool:
        """No months and no days: the same length in every zone."""
        return self.months == 0 and self.days == 0

    def longest(self, tz: str | None = None) -> timedelta:
        """The longest this span can take from any start (a DST hour included unless the zone is UTC)."""
        years, months = divmod(self.months, 12)
        most = timedelta(days=years * LONGEST_YEAR_DAYS + self.days, milliseconds=self.ms) + months * LONGEST_MONTH
        return most if self.is_fixed or tz in (None, "UTC") else most + DST_MARGIN


def parse_span(text: str) -> Span:
    """`'1mo'` -> Span(months=1); `'1y2w'` -> Span(months=12, days=14); `'36h'` -> Span(ms=129_600_000)."""
    s = text.strip() if isinstance(text, str) else ""
    m = _SPAN.match(s)
    if not s or m is None or not any(m.groups()):
        raise CalendarError(f"{text!r} is not a span; use numbers with units, largest first: 1y, 1mo, 2w, 3d "
                            f"(in local wall time), then 12h, 30m, 10s, 250ms")
    y, mo, w, d, h, mi, sec, ms = (int(g) if g else 0 for g in m.groups())
    span = Span(months=12 * y + mo, days=7 * w + d, ms=h * _FIXED_MS["h"] + mi * _FIXED_MS["m"] + sec * 1000 + ms)
    if span == Span():
        raise CalendarError(f"span {text!r} must be greater than zero")
    return span


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The IANA zone `name`; CalendarError when there is none."""
    try:
        if not isinstance(name, str) or not name or name != name.strip() or name.startswith("/") or ".." in name:
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise CalendarError(f"unknown IANA time zone {name!r} (e.g. America/Sao_Paulo, Europe/Lisbon, UTC)") from exc


def classify(nominal: datetime, tz: ZoneInfo) -> tuple[str, datetime, datetime]:
    """('normal' | 'nonexistent' | 'ambiguous', first UTC instant, second UTC instant) of a naive local time.

    For a nonexistent time the first instant is the fold=0 reading (shifted forward by the gap); for a normal
    time both are equal; for an ambiguous one they are the two instants, earlier first."""
    a = nominal.replace(tzinfo=tz, fold=0).astimezone(UTC)
    b = nominal.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if a.astimezone(tz).replace(tzinfo=None) != nominal:
        return "nonexistent", a, a
    if a == b:
        return "normal", a, a
    return "ambiguous", min(a, b), max(a, b)


def resolve_local(nominal: datetime, tz: ZoneInfo, dst_policy: str = DEFAULT_DST_POLICY) -> datetime:
    """The one instant (UTC) a timer due at the naive local time `nominal` ends at (the table above)."""
    if dst_policy not in DST_POLICIES:
        raise CalendarError(f"dstPolicy must be one of {', '.join(DST_POLICIES)}, not {dst_policy!r}")
    kind, first, second = classify(nominal, tz)
    return second if kind == "ambiguous" and dst_policy == "run-twice" else first


def add_months(local: datetime, months: int) -> datetime:
    """`local` moved by whole months, the day clamped to the month's last (31 Jan + 1 = 28/29 Feb)."""
    y, m = divmod(local.month - 1 + months, 12)
    year, month = local.year + y, m + 1
    return local.replace(year=year, month=month, day=min(local.day, _stdlib_calendar.monthrange(year, month)[1]))


def due_for(start: datetime, span: Span, tz: str = "UTC", dst_policy: str = DEFAULT_DST_POLICY) -> datetime:
    """When a timer of `span` that opens at the aware instant `start` is due (aware, UTC)."""
    if start.tzinfo is None:
        raise CalendarError("a timer opens at an aware instant, not a naive time")
    start = start.astimezone(UTC)
    if not span.is_fixed:
        zi = zone(tz)
        wall = start.astimezone(zi).replace(tzinfo=None)
        start = resolve_local(add_months(wall, span.months) + timedelta(days=span.days), zi, dst_policy)
    elif dst_policy not in DST_POLICIES:
        raise CalendarError(f"dstPolicy must be one of {', '.join(DST_POLICIES)}, not {dst_policy!r}")
    return start + timedelta(milliseconds=span.ms)


def due_after(start: datetime, amount: int, unit: str, tz: str = "UTC",
              dst_policy: str = DEFAULT_DST_POLICY) -> datetime:
    """`amount` of one `unit` (`y`, `mo`, `w`, `d` in wall time; `h`, `m`, `s`, `ms` elapsed) after `start`."""
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
        raise CalendarError(f"the amount of a timer is a whole number >= 0, not {amount!r}")
    spans = {"y": Span(months=12 * amount), "mo": Span(months=amount), "w": Span(days=7 * amount),
             "d": Span(days=amount)}
    if unit in spans:
        return due_for(start, spans[unit], tz, dst_policy)
    if unit in _FIXED_MS:
        return due_for(start, Span(ms=amount * _FIXED_MS[unit]), tz, dst_policy)
    raise CalendarError(f"unit {unit!r} is not one of y, mo, w, d, h, m, s, ms")


def parse_instant(text: str) -> datetime:
    """An ISO 8601 instant with its offset (`2026-07-01T09:00:00-03:00`, `...Z`) -> aware datetime (offset kept).
    CalendarError for anything else, naive times and bare dates included."""
    if not isinstance(text, str) or not text.strip():
        raise CalendarError(f"{text!r} is not an instant; write an ISO 8601 date-time with its offset, "
                            f"e.g. 2026-07-01T09:00:00-03:00 or 2026-07-01T12:00:00Z")
    s = text.strip()
    try:
        value = datetime.fromisoformat(s[:-1] + "+00:00" if s[-1:] in "zZ" else s)
    except ValueError:
        raise CalendarError(f"{text!r} is not an ISO 8601 instant; write e.g. 2026-07-01T09:00:00-03:00 "
                            f"or 2026-07-01T12:00:00Z") from None
    if "T" not in s.upper() and " " not in s:
        raise CalendarError(f"{text!r} is a date, not an instant; add the time and its offset, "
                            f"e.g. {s}T00:00:00-03:00")
    if value.tzinfo is None or value.utcoffset() is None:
        raise CalendarError(f"{text!r} has no UTC offset, so it names a different instant in every zone; add "
                            f"one, e.g. {s}-03:00 or {s}Z")
    return value
