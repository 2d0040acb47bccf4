"""Occurrences of a schedule (§11), pure: no database, no clock.

The cron fields select *nominal* local wall-clock times (naive datetimes: croniter is only asked to enumerate
those, on naive values, where it knows nothing of time zones). Each nominal time then becomes zero, one or two
firing instants in the trigger's IANA zone, by `dstPolicy`:

| nominal local time is...            | skip-nonexistent | run-once                    | run-twice         |
|-------------------------------------|------------------|-----------------------------|-------------------|
| normal (exists once)                | fires            | fires                       | fires             |
| nonexistent (spring-forward gap)    | skipped          | fires, shifted by the gap   | same as run-once  |
| ambiguous (fall-back fold)          | first instant    | first instant               | both instants     |

"Shifted by the gap" is what zoneinfo's `fold=0` gives for a time in a gap: the wall time read with the offset in
force before the transition (02:30 in a 02:00->03:00 gap is 03:30 new time); `classify`, which reads a nominal
time so, lives in core calendar.py, shared with durable timers (§19). The firing instants are a set: a
shifted time landing on an instant that already fires does not fire again.

The occurrence key `{trigger_id}:{occurrence_iso}` uses the firing instant as local time with its UTC offset, so
it is a function of the schedule alone; the two instants of a fold differ by their offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from ... import calendar
from ...calendar import DST_POLICIES, classify

UTC = UTC
_DAY = timedelta(days=1)


class ScheduleError(ValueError):
    """A cron expression, zone or policy that cannot be evaluated."""


@dataclass(frozen=True)
class Firing:
    """One firing instant of a schedule."""
    instant: datetime           # aware, UTC
    local: datetime             # the same instant in the schedule's zone (aware, with the right fold)
    nominal: datetime           # the naive local wall-clock time the cron selected
    shifted: bool               # the nominal time did not exist (spring-forward gap): fired later by the gap
    second_instant: bool        # the later of the two instants of an ambiguous nominal time (run-twice only)

    @property
    def occurrence_iso(self) -> str:
        return occurrence_iso(self.local)

    def key(self, trigger_id: str) -> str:
        return occurrence_key(trigger_id, self.local)

    def to_dict(self, trigger_id: str | None = None) -> dict:
        d = {"instant_utc": iso_utc(self.instant), "local": self.occurrence_iso,
             "nominal": self.nominal.isoformat(), "shifted": self.shifted, "second_instant": self.second_instant}
        if trigger_id is not None:
            d["occurrence_key"] = self.key(trigger_id)
        return d


def iso_utc(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def occurrence_iso(local: datetime) -> str:
    """`2026-11-01T01:30:00-04:00`: local wall time with the UTC offset in force at that instant."""
    return local.replace(microsecond=0).isoformat(timespec="seconds")


def occurrence_key(trigger_id: str, local: datetime) -> str:
    return f"{trigger_id}:{occurrence_iso(local)}"


def zone(name: str) -> ZoneInfo:
    try:
        return calendar.zone(name)
    except calendar.CalendarError as exc:
        raise ScheduleError(f"unknown IANA time zone {name!r}") from exc


def _local(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def _edge_margin(instant: datetime, tz: ZoneInfo) -> timedelta:
    """How far beyond a window edge's local time nominal times must be enumerated: a shifted time fires up to a
    gap after its nominal value, a fold replays up to its length; both are offset changes within a day of the
    edge (a 24 h change such as Pacific/Apia's skipped 2011-12-30 included)."""
    offsets = [(instant + k * _DAY).astimezone(tz).utcoffset() for k in (-1, 0, 1)]
    return timedelta(hours=1) + (max(offsets) - min(offsets))


def nominal_times(cron: str, start: datetime, end: datetime) -> Iterator[datetime]:
    """Naive local times selected by `cron` in [start, end) (both naive)."""
    from croniter import croniter

    try:
        it = croniter(cron, start - timedelta(minutes=1))
    except Exception as exc:  # croniter raises assorted types  # noqa: BLE001
        raise ScheduleError(f"invalid cron expression {cron!r}: {exc}") from exc
    while True:
        t = it.get_next(datetime)
        if t >= end:
            return
        if t >= start:
            yield t


def firings(cron: str, tz_name: str, dst_policy: str, start: datetime, end: datetime) -> list[Firing]:
    """Every firing instant in [start, end) (aware datetimes), in order, as a set (no instant twice)."""
    if dst_policy not in DST_POLICIES:
        raise ScheduleError(f"dstPolicy must be one of {', '.join(DST_POLICIES)}, not {dst_policy!r}")
    if start.tzinfo is None or end.tzinfo is None:
        raise ScheduleError("the window of a schedule is given as aware instants")
    tz = zone(tz_name)
    start_u, end_u = start.astimezone(UTC), end.astimezone(UTC)
    if end_u <= start_u:
        return []
    lo = _local(start_u, tz) - _edge_margin(start_u, tz)
    hi = _local(end_u, tz) + _edge_margin(end_u, tz)
    found: dict[datetime, Firing] = {}

    def add(instant: datetime, nominal: datetime, shifted: bool, second: bool) -> None:
        if not (start_u <= instant < end_u):
            return
        have = found.get(instant)
        # a set of instants: when two nominal times give one instant, keep the unshifted reading
        if have is None or (have.shifted and not shifted):
            found[instant] = Firing(instant, instant.astimezone(tz), nominal, shifted, second)

    for nominal in nominal_times(cron, lo, hi):
        kind, first, second = classify(nominal, tz)
        if kind == "normal":
            add(first, nominal, False, False)
        elif kind == "nonexistent":
            if dst_policy != "skip-nonexistent":
                add(first, nominal, True, False)
        else:
            add(first, nominal, False, False)
            if dst_policy == "run-twice":
                add(second, nominal, False, True)
    return [found[k] for k in sorted(found)]


def firings_after(cron: str, tz_name: str, dst_policy: str, after: datetime, *, limit: int = 1,
                  horizon: timedelta = timedelta(days=400)) -> list[Firing]:
    """The next `limit` firings strictly after `after`, searched in growing windows up to `horizon`."""
    out: list[Firing] = []
    lo = after + timedelta(microseconds=1)
    step = timedelta(days=1)
    end_all = after + horizon
    while len(out) < limit and lo < end_all:
        hi = min(lo + step, end_all)
        out.extend(firings(cron, tz_name, dst_policy, lo, hi))
        lo, step = hi, step * 4
    return out[:limit]
