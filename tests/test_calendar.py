"""Calendar time (core calendar.py): the due instant of a durable timer (§19) in local wall time, month ends
clamped, DST gaps and folds resolved by dstPolicy with the same reading of zoneinfo a schedule uses (§11), and the
`until` instant that must carry its offset."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anthares44.automation.calendar import (
    DST_POLICIES,
    CalendarError,
    Span,
    add_months,
    classify,
    due_after,
    due_for,
    parse_instant,
    parse_span,
    resolve_local,
)
from anthares44.automation.runtime.scheduling import occurrences

SP, BERLIN, NY = "America/Sao_Paulo", "Europe/Berlin", "America/New_York"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def local(instant: datetime, tz: str) -> str:
    return instant.astimezone(ZoneInfo(tz)).isoformat()


# --- month ends, leap years, weeks, years ---------------------------------------------------------------------
@pytest.mark.parametrize("start, amount, unit, want", [
    ("2026-01-31T10:00:00-03:00", 1, "mo", "2026-02-28T10:00:00-03:00"),
    ("2028-01-31T10:00:00-03:00", 1, "mo", "2028-02-29T10:00:00-03:00"),   # leap year
    ("2026-01-31T10:00:00-03:00", 2, "mo", "2026-03-31T10:00:00-03:00"),   # months at once, not clamped twice
    ("2026-03-31T10:00:00-03:00", 1, "mo", "2026-04-30T10:00:00-03:00"),
    ("2026-12-31T23:59:00-03:00", 2, "mo", "2027-02-28T23:59:00-03:00"),   # across the year
    ("2026-08-15T08:00:00-03:00", 13, "mo", "2027-09-15T08:00:00-03:00"),
    ("2028-02-29T12:00:00-03:00", 1, "y", "2029-02-28T12:00:00-03:00"),    # 29 Feb + 1y = 28 Feb
    ("2028-02-29T12:00:00-03:00", 4, "y", "2032-02-29T12:00:00-03:00"),
    ("2026-05-01T07:00:00-03:00", 1, "w", "2026-05-08T07:00:00-03:00"),
    ("2026-05-28T07:00:00-03:00", 1, "w", "2026-06-04T07:00:00-03:00"),
    ("2026-05-01T07:00:00-03:00", 3, "d", "2026-05-04T07:00:00-03:00"),
])
def test_calendar_units_in_local_wall_time(start, amount, unit, want):
    assert local(due_after(at(start), amount, unit, SP), SP) == want


def test_the_result_is_utc_and_a_month_is_not_thirty_days():
    due = due_after(at("2026-02-01T00:00:00Z"), 1, "mo", "UTC")
    assert due.tzinfo is UTC and due == at("2026-03-01T00:00:00+00:00")
    assert due - at("2026-02-01T00:00:00Z") == timedelta(days=28)


def test_add_months_clamps_to_the_last_day():
    assert add_months(datetime(2026, 5, 31, 1, 2, 3, 4), 1) == datetime(2026, 6, 30, 1, 2, 3, 4)
    assert add_months(datetime(2026, 1, 30), -1) == datetime(2025, 12, 30)
    assert add_months(datetime(2024, 2, 29), 12) == datetime(2025, 2, 28)


# --- DST: a day is a wall-clock day, not 24 h -------------------------------------------------------------------
@pytest.mark.parametrize("tz, start, want, hours", [
    # Berlin springs forward 29 Mar 2026 02:00 -> 03:00 and falls back 25 Oct 03:00 -> 02:00
    (BERLIN, "2026-03-28T12:00:00+01:00", "2026-03-29T12:00:00+02:00", 23),
    (BERLIN, "2026-10-24T12:00:00+02:00", "2026-10-25T12:00:00+01:00", 25),
    # New York: 8 Mar 2026 02:00 -> 03:00, 1 Nov 02:00 -> 01:00
    (NY, "2026-03-07T09:00:00-05:00", "2026-03-08T09:00:00-04:00", 23),
    (NY, "2026-10-31T09:00:00-04:00", "2026-11-01T09:00:00-05:00", 25),
    # Sao Paulo's last DST (historic): 4 Nov 2018 00:00 -> 01:00, 17 Feb 2019 00:00 -> 16 Feb 23:00
    (SP, "2018-11-03T12:00:00-03:00", "2018-11-04T12:00:00-02:00", 23),
    (SP, "2019-02-16T12:00:00-02:00", "2019-02-17T12:00:00-03:00", 25),
])
def test_a_day_across_a_change_keeps_the_wall_time(tz, start, want, hours):
    due = due_after(at(start), 1, "d", tz)
    assert local(due, tz) == want
    assert due - at(start) == timedelta(hours=hours)


@pytest.mark.parametrize("tz, start, shifted", [
    # the wall time lands in the gap: shifted forward by the gap (zoneinfo fold=0, as schedules' run-once)
    (BERLIN, "2026-03-28T02:30:00+01:00", "2026-03-29T03:30:00+02:00"),
    (NY, "2026-03-07T02:30:00-05:00", "2026-03-08T03:30:00-04:00"),
    (SP, "2018-11-03T00:30:00-03:00", "2018-11-04T01:30:00-02:00"),
    (SP, "2018-10-04T00:15:00-03:00", "2018-11-04T01:15:00-02:00"),    # a month into the gap
])
@pytest.mark.parametrize("policy", DST_POLICIES)
def test_a_gap_shifts_forward_by_its_length_under_every_policy(tz, start, shifted, policy):
    """A schedule skips a nonexistent time under skip-nonexistent; a timer cannot be skipped, so every policy
    ends it where run-once fires."""
    assert local(due_after(at(start), 1, "mo" if "10-04" in start else "d", tz, policy), tz) == shifted


@pytest.mark.parametrize("tz, start, first, second", [
    (BERLIN, "2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00"),
    (NY, "2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"),
    (SP, "2019-02-15T23:30:00-02:00", "2019-02-16T23:30:00-02:00", "2019-02-16T23:30:00-03:00"),
    (NY, "2026-10-01T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"),
])
def test_a_fold_takes_the_first_instant_or_under_run_twice_the_second(tz, start, first, second):
    unit = "mo" if "10-01" in start else "d"
    assert local(due_after(at(start), 1, unit, tz), tz) == first                       # default skip-nonexistent
    assert local(due_after(at(start), 1, unit, tz, "run-once"), tz) == first
    assert local(due_after(at(start), 1, unit, tz, "run-twice"), tz) == second
    assert due_after(at(start), 1, unit, tz, "run-twice") - due_after(at(start), 1, unit, tz) == timedelta(hours=1)


def test_a_start_inside_a_fold_reads_its_own_wall_time():
    """The second 01:30 of New York's fold plus a day is the next day's 01:30, one hour less than 25 h later."""
    second_0130 = at("2026-11-01T01:30:00-05:00")
    due = due_after(second_0130, 1, "d", NY)
    assert local(due, NY) == "2026-11-02T01:30:00-05:00" and due - second_0130 == timedelta(hours=24)


def test_schedules_and_timers_read_local_times_with_one_rule():
    """occurrences.py uses core's classify: the scheduler and the timers cannot drift apart."""
    assert occurrences.classify is classify
    tz = ZoneInfo(NY)
    for nominal in (datetime(2026, 3, 8, 2, 30), datetime(2026, 11, 1, 1, 30), datetime(2026, 6, 1, 9, 0)):
        kind, first, second = classify(nominal, tz)
        fired = occurrences.firings(f"{nominal.minute} {nominal.hour} * * *", NY, "run-twice", nominal.replace(tzinfo=tz) - timedelta(hours=2),
                                    nominal.replace(tzinfo=tz) + timedelta(hours=3))
        instants = {f.instant for f in fired if f.nominal == nominal}
        assert resolve_local(nominal, tz, "run-once") == min(instants)
        assert resolve_local(nominal, tz, "run-twice") == max(instants) == second


# --- spans: calendar parts then fixed parts ---------------------------------------------------------------------
@pytest.mark.parametrize("text, span", [
    ("1mo", Span(months=1)), ("1y", Span(months=12)), ("1y6mo", Span(months=18)), ("2w", Span(days=14)),
    ("2w3d", Span(days=17)), ("30d", Span(days=30)), ("1d12h", Span(days=1, ms=43_200_000)),
    ("90m", Span(ms=5_400_000)), ("1m30s", Span(ms=90_000)), ("250ms", Span(ms=250)),
    ("1y1mo1w1d1h1m1s1ms", Span(months=13, days=8, ms=3_661_001)),
])
def test_parse_span(text, span):
    assert parse_span(text) == span


@pytest.mark.parametrize("text", ["", "1", "mo", "1month", "1M", "1d1y", "1mo1mo", "0d", "0mo0s", "-1d", "1.5d",
                                  " ", "1 mo"])
def test_parse_span_refuses(text):
    with pytest.raises(CalendarError, match="span"):
        parse_span(text)


def test_mixed_spans_add_the_calendar_part_in_wall_time_then_the_fixed_part_as_elapsed_time():
    start = at("2026-03-07T20:00:00-05:00")                           # the evening before New York springs forward
    due = due_for(start, parse_span("1d12h"), NY)
    assert local(due, NY) == "2026-03-09T08:00:00-04:00"               # 8 Mar 20:00 (EDT) + 12 h elapsed
    assert due - start == timedelta(hours=35)
    assert due_for(start, parse_span("36h"), NY) - start == timedelta(hours=36)     # fixed: the zone is not read
    jan31 = at("2026-01-31T10:00:00-03:00")
    assert local(due_for(jan31, parse_span("1mo2d6h"), SP), SP) == "2026-03-02T16:00:00-03:00"


def test_fixed_spans_are_elapsed_time_in_any_zone():
    start = at("2026-10-24T12:00:00+02:00")
    assert due_after(start, 24, "h", BERLIN) - start == timedelta(hours=24)
    assert due_after(start, 90, "s", BERLIN) - start == timedelta(seconds=90)
    assert due_after(start, 1, "d", "UTC") - start == timedelta(hours=24)


def test_longest_span_bounds_every_start():
    assert parse_span("1mo").longest("UTC") == timedelta(days=31)
    assert parse_span("1mo").longest(NY) == timedelta(days=31, hours=1)
    assert parse_span("1y").longest(SP) == timedelta(days=366, hours=1)
    assert parse_span("36h").longest(NY) == timedelta(hours=36)


@pytest.mark.parametrize("bad", [
    lambda: due_after(at("2026-01-01T00:00:00Z"), 1, "mo", "Mars/Olympus"),
    lambda: due_after(at("2026-01-01T00:00:00Z"), 1, "mo", "../etc/passwd"),
    lambda: due_after(at("2026-01-01T00:00:00Z"), 1, "fortnight", SP),
    lambda: due_after(at("2026-01-01T00:00:00Z"), -1, "d", SP),
    lambda: due_after(at("2026-01-01T00:00:00Z"), 1, "d", SP, "run-thrice"),
    lambda: due_after(at("2026-01-01T00:00:00Z"), 1, "h", SP, "run-thrice"),
    lambda: due_after(datetime(2026, 1, 1), 1, "d", SP),
])
def test_bad_input_is_a_calendar_error(bad):
    with pytest.raises(CalendarError):
        bad()


# --- until ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, utc", [
    ("2026-07-01T09:00:00-03:00", "2026-07-01T12:00:00+00:00"),
    ("2026-07-01T12:00:00Z", "2026-07-01T12:00:00+00:00"),
    ("2026-07-01T12:00:00z", "2026-07-01T12:00:00+00:00"),
    ("2026-07-01T12:00:00.250+00:00", "2026-07-01T12:00:00.250000+00:00"),
    ("2026-07-01 09:00+05:30", "2026-07-01T03:30:00+00:00"),
])
def test_parse_instant_with_an_offset(text, utc):
    value = parse_instant(text)
    assert value.astimezone(UTC).isoformat() == utc


def test_parse_instant_keeps_the_offset_written():
    assert parse_instant("2026-07-01T09:00:00-03:00").isoformat() == "2026-07-01T09:00:00-03:00"


@pytest.mark.parametrize("text, why", [
    ("2026-07-01T09:00:00", "no UTC offset"), ("2026-07-01", "a date, not an instant"),
    ("next tuesday", "not an ISO 8601 instant"), ("", "not an instant"), ("2026-02-30T00:00:00Z", "ISO 8601"),
    ("2026-07-01T25:00:00Z", "ISO 8601"),
])
def test_parse_instant_refuses_naive_and_unparseable_text(text, why):
    with pytest.raises(CalendarError, match=why):
        parse_instant(text)


# --- properties -------------------------------------------------------------------------------------------------
ZONES = st.sampled_from([SP, BERLIN, NY, "UTC", "Australia/Lord_Howe", "Asia/Kolkata"])
STARTS = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2037, 12, 31), timezones=st.just(UTC))


@settings(max_examples=300, deadline=None)
@given(start=STARTS, months=st.integers(0, 48), days=st.integers(0, 400), ms=st.integers(0, 10 ** 9), tz=ZONES,
       policy=st.sampled_from(DST_POLICIES))
def test_a_timer_is_never_due_before_it_opens_and_never_later_than_its_longest(start, months, days, ms, tz, policy):
    span = Span(months, days, ms)
    due = due_for(start, span, tz, policy)
    assert due.tzinfo is UTC
    assert start <= due <= start + span.longest(tz)
    assert due == due_for(start, span, tz, policy)           # a function of its inputs: computed once, the same


@settings(max_examples=300, deadline=None)
@given(start=STARTS, months=st.integers(1, 48), tz=ZONES)
def test_a_month_keeps_the_day_or_clamps_to_the_month_end(start, months, tz):
    wall = start.astimezone(ZoneInfo(tz))
    due = due_after(start, months, "mo", tz).astimezone(ZoneInfo(tz))
    assert (due.year * 12 + due.month) - (wall.year * 12 + wall.month) == months
    assert due.day == wall.day or (due.day < wall.day and (due + timedelta(days=1)).month != due.month)


@settings(max_examples=300, deadline=None)
@given(start=STARTS, days=st.integers(1, 400), tz=ZONES)
def test_days_and_weeks_agree_and_keep_the_wall_time_when_it_exists(start, days, tz):
    zi = ZoneInfo(tz)
    due = due_after(start, days, "d", tz)
    assert days % 7 or due == due_after(start, days // 7, "w", tz)
    wall = start.astimezone(zi).replace(tzinfo=None) + timedelta(days=days)
    if classify(wall, zi)[0] == "normal":
        assert due.astimezone(zi).replace(tzinfo=None) == wall


@settings(max_examples=200, deadline=None)
@given(instant=st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2099, 12, 31),
                            timezones=st.sampled_from([UTC, ZoneInfo(SP), ZoneInfo(BERLIN)]), allow_imaginary=False))
def test_parse_instant_reads_back_what_isoformat_writes(instant):
    # compared in UTC: PEP 495 makes an ambiguous local time unequal to every instant of another zone
    assert parse_instant(instant.isoformat()).astimezone(UTC) == instant.astimezone(UTC)
    with pytest.raises(CalendarError):
        parse_instant(instant.replace(tzinfo=None).isoformat())
