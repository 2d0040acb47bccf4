"""Occurrence computation (§11 dstPolicy table), pure: nominal local times -> firing instants, per zone and policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from anthares44.automation.runtime.scheduling import ScheduleError, classify, firings, firings_after, occurrence_key

UTC = UTC
POLICIES = ("skip-nonexistent", "run-once", "run-twice")


def local(zone: str, text: str) -> datetime:
    """A window bound written as local time in `zone` (fold=0)."""
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone))


def fire(cron, zone, policy, start, end):
    return [f.occurrence_iso for f in firings(cron, zone, policy, local(zone, start), local(zone, end))]


# (zone, cron, window start, window end (local), {policy: expected local firings with offset})
DAILY = [
    # America/New_York 2026: spring forward 03-08 02:00 -> 03:00; fall back 11-01 02:00 -> 01:00
    ("America/New_York", "30 2 * * *", "2026-03-07T12:00", "2026-03-09T12:00", {
        "skip-nonexistent": ["2026-03-09T02:30:00-04:00"],
        "run-once": ["2026-03-08T03:30:00-04:00", "2026-03-09T02:30:00-04:00"],
        "run-twice": ["2026-03-08T03:30:00-04:00", "2026-03-09T02:30:00-04:00"]}),
    ("America/New_York", "30 1 * * *", "2026-10-31T12:00", "2026-11-02T12:00", {
        "skip-nonexistent": ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
        "run-once": ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
        "run-twice": ["2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"]}),
    # Europe/Lisbon 2026: 03-29 01:00 -> 02:00 (WET -> WEST); 10-25 02:00 -> 01:00
    ("Europe/Lisbon", "30 1 * * *", "2026-03-28T12:00", "2026-03-30T12:00", {
        "skip-nonexistent": ["2026-03-30T01:30:00+01:00"],
        "run-once": ["2026-03-29T02:30:00+01:00", "2026-03-30T01:30:00+01:00"],
        "run-twice": ["2026-03-29T02:30:00+01:00", "2026-03-30T01:30:00+01:00"]}),
    ("Europe/Lisbon", "30 1 * * *", "2026-10-24T12:00", "2026-10-26T12:00", {
        "skip-nonexistent": ["2026-10-25T01:30:00+01:00", "2026-10-26T01:30:00+00:00"],
        "run-once": ["2026-10-25T01:30:00+01:00", "2026-10-26T01:30:00+00:00"],
        "run-twice": ["2026-10-25T01:30:00+01:00", "2026-10-25T01:30:00+00:00", "2026-10-26T01:30:00+00:00"]}),
    # Australia/Lord_Howe 2026: a 30-minute shift. 10-04 02:00 -> 02:30 (+10:30 -> +11); 04-05 02:00 -> 01:30
    ("Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00", "2026-10-05T12:00", {
        "skip-nonexistent": ["2026-10-05T02:15:00+11:00"],
        "run-once": ["2026-10-04T02:45:00+11:00", "2026-10-05T02:15:00+11:00"],
        "run-twice": ["2026-10-04T02:45:00+11:00", "2026-10-05T02:15:00+11:00"]}),
    ("Australia/Lord_Howe", "45 1 * * *", "2026-04-04T12:00", "2026-04-06T12:00", {
        "skip-nonexistent": ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"],
        "run-once": ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"],
        "run-twice": ["2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30", "2026-04-06T01:45:00+10:30"]}),
    # America/Sao_Paulo had DST until 2019: 2018-11-04 00:00 -> 01:00 and 2019-02-17 00:00 -> 02-16 23:00 ...
    ("America/Sao_Paulo", "30 0 * * *", "2018-11-03T12:00", "2018-11-05T12:00", {
        "skip-nonexistent": ["2018-11-05T00:30:00-02:00"],
        "run-once": ["2018-11-04T01:30:00-02:00", "2018-11-05T00:30:00-02:00"],
        "run-twice": ["2018-11-04T01:30:00-02:00", "2018-11-05T00:30:00-02:00"]}),
    ("America/Sao_Paulo", "30 23 * * *", "2019-02-16T12:00", "2019-02-17T12:00", {
        "skip-nonexistent": ["2019-02-16T23:30:00-02:00"],
        "run-once": ["2019-02-16T23:30:00-02:00"],
        "run-twice": ["2019-02-16T23:30:00-02:00", "2019-02-16T23:30:00-03:00"]}),
    # ... and none after: the same Sunday of 2020 is an ordinary night at -03:00 for every policy
    ("America/Sao_Paulo", "30 0 * * *", "2020-10-31T12:00", "2020-11-02T12:00", {
        p: ["2020-11-01T00:30:00-03:00", "2020-11-02T00:30:00-03:00"] for p in POLICIES}),
    ("America/Sao_Paulo", "30 23 * * *", "2021-02-19T12:00", "2021-02-21T12:00", {
        p: ["2021-02-19T23:30:00-03:00", "2021-02-20T23:30:00-03:00"] for p in POLICIES}),
    # UTC never shifts
    ("UTC", "30 2 * * *", "2026-03-07T00:00", "2026-03-10T00:00", {
        p: ["2026-03-07T02:30:00+00:00", "2026-03-08T02:30:00+00:00", "2026-03-09T02:30:00+00:00"]
        for p in POLICIES}),
]


@pytest.mark.parametrize("zone,cron,start,end,expected", DAILY,
                         ids=[f"{z}-{c}-{s[:10]}" for z, c, s, _, _ in DAILY])
@pytest.mark.parametrize("policy", POLICIES)
def test_daily_across_transitions(zone, cron, start, end, expected, policy):
    assert fire(cron, zone, policy, start, end) == expected[policy]


def test_hourly_new_york_spring_set_semantic():
    # 02:00 does not exist; run-once shifts it to 03:00, which fires anyway: it does not fire twice
    for policy in POLICIES:
        fs = firings("0 * * * *", "America/New_York", policy, local("America/New_York", "2026-03-08T00:00"),
                     local("America/New_York", "2026-03-08T05:00"))
        assert [f.occurrence_iso for f in fs] == ["2026-03-08T00:00:00-05:00", "2026-03-08T01:00:00-05:00",
                                                  "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"]
        assert not any(f.shifted for f in fs)   # 03:00 is its own nominal time, not a shifted 02:00


def test_hourly_new_york_fall():
    start, end = local("America/New_York", "2026-11-01T00:00"), datetime(2026, 11, 1, 9, tzinfo=UTC)
    base = ["2026-11-01T00:00:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00",
            "2026-11-01T03:00:00-05:00"]
    for policy in ("skip-nonexistent", "run-once"):
        assert [f.occurrence_iso for f in firings("0 * * * *", "America/New_York", policy, start, end)] == base
    twice = firings("0 * * * *", "America/New_York", "run-twice", start, end)
    assert [f.occurrence_iso for f in twice] == base[:2] + ["2026-11-01T01:00:00-05:00"] + base[2:]
    assert [f.second_instant for f in twice] == [False, False, True, False, False]
    # UTC instants strictly increasing, one hour apart: the fold hour really fires twice
    assert [f.instant.hour for f in twice] == [4, 5, 6, 7, 8]


def test_hourly_lord_howe_spring_shift_is_not_a_duplicate():
    # 02:00 does not exist (02:00 -> 02:30); shifted by the 30-minute gap it fires at 02:30, no other firing there
    start, end = local("Australia/Lord_Howe", "2026-10-04T00:00"), local("Australia/Lord_Howe", "2026-10-04T04:00")
    skip = [f.occurrence_iso for f in firings("0 * * * *", "Australia/Lord_Howe", "skip-nonexistent", start, end)]
    assert skip == ["2026-10-04T00:00:00+10:30", "2026-10-04T01:00:00+10:30", "2026-10-04T03:00:00+11:00"]
    for policy in ("run-once", "run-twice"):
        fs = firings("0 * * * *", "Australia/Lord_Howe", policy, start, end)
        assert [f.occurrence_iso for f in fs] == ["2026-10-04T00:00:00+10:30", "2026-10-04T01:00:00+10:30",
                                                  "2026-10-04T02:30:00+11:00", "2026-10-04T03:00:00+11:00"]
        assert [f.shifted for f in fs] == [False, False, True, False]
        assert fs[2].instant == datetime(2026, 10, 3, 15, 30, tzinfo=UTC)


def test_quarter_hourly_lord_howe_fall():
    start, end = local("Australia/Lord_Howe", "2026-04-05T01:00"), datetime(2026, 4, 4, 15, 46, tzinfo=UTC)
    expect_once = ["2026-04-05T01:00:00+11:00", "2026-04-05T01:15:00+11:00", "2026-04-05T01:30:00+11:00",
                   "2026-04-05T01:45:00+11:00", "2026-04-05T02:00:00+10:30", "2026-04-05T02:15:00+10:30"]
    for policy in ("skip-nonexistent", "run-once"):
        assert [f.occurrence_iso for f in firings("*/15 * * * *", "Australia/Lord_Howe", policy, start, end)] \
            == expect_once
    twice = [f.occurrence_iso for f in firings("*/15 * * * *", "Australia/Lord_Howe", "run-twice", start, end)]
    assert twice == expect_once[:4] + ["2026-04-05T01:30:00+10:30", "2026-04-05T01:45:00+10:30"] + expect_once[4:]


@pytest.mark.parametrize("policy", POLICIES)
def test_minutely_new_york_spring(policy):
    # 01:58 EST .. 04:00 EDT: 2 minutes before the gap, 60 after; the shifted 02:xx all land on 03:xx (a set)
    fs = firings("* * * * *", "America/New_York", policy, local("America/New_York", "2026-03-08T01:58"),
                 local("America/New_York", "2026-03-08T04:00"))
    assert len(fs) == 62 and not any(f.shifted for f in fs)
    assert len({f.instant for f in fs}) == 62
    assert all(b.instant - a.instant == timedelta(minutes=1) for a, b in zip(fs, fs[1:]))


@pytest.mark.parametrize("policy,count", [("skip-nonexistent", 62), ("run-once", 62), ("run-twice", 122)])
def test_minutely_new_york_fall(policy, count):
    fs = firings("* * * * *", "America/New_York", policy, datetime(2026, 11, 1, 4, 59, tzinfo=UTC),
                 datetime(2026, 11, 1, 7, 1, tzinfo=UTC))
    assert len(fs) == count
    assert sum(f.second_instant for f in fs) == (60 if policy == "run-twice" else 0)
    assert len({f.key("t") for f in fs}) == count      # keys differ by offset inside the fold
    if policy != "run-twice":   # the fold's second hour (06:00Z..06:59Z) is silent
        assert not any(6 <= f.instant.hour < 7 for f in fs)


@pytest.mark.parametrize("policy", POLICIES)
def test_minutely_lord_howe_spring(policy):
    fs = firings("* * * * *", "Australia/Lord_Howe", policy, local("Australia/Lord_Howe", "2026-10-04T01:50"),
                 local("Australia/Lord_Howe", "2026-10-04T03:10"))
    # 01:50..01:59 (10) + 02:30..03:09 (40); run-once's shifted 02:00..02:29 land on 02:30..02:59: no extra firing
    assert len(fs) == 50 and not any(f.shifted for f in fs)


def test_classify():
    ny = ZoneInfo("America/New_York")
    assert classify(datetime(2026, 3, 8, 2, 30), ny)[0] == "nonexistent"
    kind, a, b = classify(datetime(2026, 11, 1, 1, 30), ny)
    assert kind == "ambiguous" and a == datetime(2026, 11, 1, 5, 30, tzinfo=UTC) and b - a == timedelta(hours=1)
    assert classify(datetime(2026, 7, 1, 1, 30), ny)[0] == "normal"


def test_occurrence_key_and_window():
    fs = firings("30 1 * * *", "America/New_York", "run-twice", datetime(2026, 11, 1, tzinfo=UTC),
                 datetime(2026, 11, 2, tzinfo=UTC))
    assert [f.key("trg_x") for f in fs] == ["trg_x:2026-11-01T01:30:00-04:00", "trg_x:2026-11-01T01:30:00-05:00"]
    assert occurrence_key("t", fs[0].local) == "t:2026-11-01T01:30:00-04:00"
    # half-open window: start inclusive, end exclusive
    at = fs[0].instant
    assert [f.instant for f in firings("30 1 * * *", "America/New_York", "run-once", at, at + timedelta(seconds=1))] == [at]
    assert firings("30 1 * * *", "America/New_York", "run-once", at - timedelta(hours=1), at) == []


def test_deterministic_and_independent_of_process_tz(monkeypatch):
    import time

    start, end = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)
    before = firings("*/30 1-3 * * *", "America/New_York", "run-once", start, end)
    monkeypatch.setenv("TZ", "Australia/Lord_Howe")
    time.tzset()
    try:
        assert firings("*/30 1-3 * * *", "America/New_York", "run-once", start, end) == before
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_next_firing_and_errors():
    nxt = firings_after("30 2 * * *", "America/New_York", "skip-nonexistent", datetime(2026, 3, 7, 8, tzinfo=UTC))
    assert nxt[0].occurrence_iso == "2026-03-09T02:30:00-04:00"    # 03-08 is skipped
    yearly = firings_after("0 0 29 2 *", "UTC", "run-once", datetime(2026, 1, 1, tzinfo=UTC), horizon=timedelta(days=1500))
    assert yearly[0].occurrence_iso == "2028-02-29T00:00:00+00:00"
    with pytest.raises(ScheduleError):
        firings("30 2 * * *", "Mars/Olympus", "run-once", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))
    with pytest.raises(ScheduleError):
        firings("30 2 * * *", "UTC", "sometimes", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))
