"""The scheduler on real PostgreSQL with a ManualClock: one run per occurrence, overlap, catch-up, crash repair."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from anthares44.automation.runtime.scheduling import Scheduler

from .support import add_trigger, finish_runs, occurrences, publish_workflow, runs_of, schedule_ir

UTC = UTC
T0 = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)


def setup(aio, store, clock, ir, *, published=T0, publish=True):
    clock.set(published)
    if publish:
        aio(publish_workflow(store))
    aio(add_trigger(store, ir, published))
    return Scheduler(store, clock=clock)


def test_fires_each_occurrence_once_with_its_key(aio, store, clock):
    ir = schedule_ir("trg_ny", "30 2 * * *", "America/New_York", dst_policy="run-once", input={"mode": "full"})
    sched = setup(aio, store, clock, ir)
    assert aio(sched.tick()).decided == {}                           # nothing due yet
    clock.set(datetime(2026, 3, 8, 7, 30, 5, tzinfo=UTC))             # 03:30 EDT: the shifted 02:30
    rep = aio(sched.tick())
    key = "trg_ny:2026-03-08T03:30:00-04:00"
    assert rep.decided == {key: "started"} and list(rep.runs_created) == [key]
    runs = aio(runs_of(store, "trg_ny"))
    assert [(r["idempotency_key"], r["input"], r["state"]) for r in runs] == [(key, {"mode": "full"}, "pending")]
    assert aio(sched.tick()).decided == {}                           # ticking again decides nothing new
    assert aio(occurrences(store, "trg_ny")) == [(key, "started")]
    assert len(aio(runs_of(store, "trg_ny"))) == 1


def test_fall_back_run_twice_fires_both_instants(aio, store, clock):
    ir = schedule_ir("trg_fold", "30 1 * * *", "America/New_York", dst_policy="run-twice", overlap="allow")
    sched = setup(aio, store, clock, ir, published=datetime(2026, 10, 31, 12, tzinfo=UTC))
    for at in (datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 1, 6, 30, tzinfo=UTC)):
        clock.set(at)
        aio(sched.tick())
    assert aio(occurrences(store, "trg_fold")) == [("trg_fold:2026-11-01T01:30:00-04:00", "started"),
                                                   ("trg_fold:2026-11-01T01:30:00-05:00", "started")]
    assert len(aio(runs_of(store, "trg_fold"))) == 2


def test_overlap_skip(aio, store, clock):
    ir = schedule_ir("trg_skip", "*/5 * * * *", overlap="skip")
    sched = setup(aio, store, clock, ir)
    clock.set(T0 + timedelta(minutes=5))
    aio(sched.tick())
    clock.set(T0 + timedelta(minutes=10))                            # the 12:05 run is still pending
    assert aio(sched.tick()).decided == {"trg_skip:2026-03-07T12:10:00+00:00": "skipped_overlap"}
    aio(finish_runs(store, "trg_skip"))
    clock.set(T0 + timedelta(minutes=15))
    assert aio(sched.tick()).decided == {"trg_skip:2026-03-07T12:15:00+00:00": "started"}
    assert [s for _, s in aio(occurrences(store, "trg_skip"))] == ["started", "skipped_overlap", "started"]


def test_overlap_queue_starts_when_previous_ends_or_expires(aio, store, clock):
    ir = schedule_ir("trg_q", "*/5 * * * *", overlap="queue", catch_up={"enabled": False, "max_occurrences": 1,
                                                                       "max_age_ms": 7 * 60_000})
    sched = setup(aio, store, clock, ir)
    clock.set(T0 + timedelta(minutes=5))
    aio(sched.tick())
    clock.set(T0 + timedelta(minutes=10))
    assert aio(sched.tick()).decided == {"trg_q:2026-03-07T12:10:00+00:00": "queued"}
    clock.set(T0 + timedelta(minutes=11))
    assert aio(sched.tick()).started_from_queue == []                # previous still running
    aio(finish_runs(store, "trg_q"))
    rep = aio(sched.tick())
    assert rep.started_from_queue == ["trg_q:2026-03-07T12:10:00+00:00"]
    assert "trg_q:2026-03-07T12:10:00+00:00" in rep.runs_created
    # 12:15 queues behind the 12:10 run and is never started: it expires at 12:15 + maxAge (7 min)
    clock.set(T0 + timedelta(minutes=15))
    assert aio(sched.tick()).decided == {"trg_q:2026-03-07T12:15:00+00:00": "queued"}
    clock.set(T0 + timedelta(minutes=20, seconds=30))
    assert aio(sched.tick()).decided == {"trg_q:2026-03-07T12:20:00+00:00": "queued"}
    clock.set(T0 + timedelta(minutes=22))
    rep = aio(sched.tick())
    assert rep.expired == ["trg_q:2026-03-07T12:15:00+00:00"] and rep.started_from_queue == []
    aio(finish_runs(store, "trg_q"))
    assert aio(sched.tick()).started_from_queue == ["trg_q:2026-03-07T12:20:00+00:00"]
    assert aio(occurrences(store, "trg_q")) == [
        ("trg_q:2026-03-07T12:05:00+00:00", "started"), ("trg_q:2026-03-07T12:10:00+00:00", "started"),
        ("trg_q:2026-03-07T12:15:00+00:00", "expired"), ("trg_q:2026-03-07T12:20:00+00:00", "started")]
    assert len(aio(runs_of(store, "trg_q"))) == 3


def test_overlap_allow_runs_in_parallel(aio, store, clock):
    ir = schedule_ir("trg_allow", "* * * * *", overlap="allow")
    sched = setup(aio, store, clock, ir)
    for m in range(1, 4):
        clock.set(T0 + timedelta(minutes=m))
        aio(sched.tick())
    assert [s for _, s in aio(occurrences(store, "trg_allow"))] == ["started"] * 3
    assert [r["state"] for r in aio(runs_of(store, "trg_allow"))] == ["pending"] * 3


def test_without_catch_up_missed_are_recorded_and_only_the_next_fires(aio, store, clock):
    ir = schedule_ir("trg_nocu", "0 * * * *")
    sched = setup(aio, store, clock, ir)
    clock.set(T0 + timedelta(hours=5, minutes=30))                   # down from 12:00 to 17:30
    rep = aio(sched.tick())
    assert set(rep.decided.values()) == {"missed"} and len(rep.decided) == 5   # 13:00 .. 17:00
    assert rep.runs_created == {}
    clock.set(T0 + timedelta(hours=6))
    assert aio(sched.tick()).decided == {"trg_nocu:2026-03-07T18:00:00+00:00": "started"}


def test_catch_up_newest_within_max_age(aio, store, clock):
    # hourly; down 12:00 -> 20:10; catch-up: at most 3, no older than 5 h -> 15:00..20:00 eligible (6), newest 3
    ir = schedule_ir("trg_cu", "0 * * * *", overlap="skip",
                     catch_up={"enabled": True, "max_occurrences": 3, "max_age_ms": 5 * 3600_000 + 600_000})
    sched = setup(aio, store, clock, ir)
    clock.set(T0 + timedelta(hours=8, minutes=10))
    rep = aio(sched.tick())
    got = {k.split("T")[1][:5]: s for k, s in rep.decided.items()}
    assert got == {"13:00": "missed", "14:00": "missed", "15:00": "missed", "16:00": "missed", "17:00": "missed",
                   "18:00": "started", "19:00": "queued", "20:00": "queued"}
    # catch-up runs go one after another (overlap skip): each starts when the previous ends
    for expect in ("19:00", "20:00"):
        aio(finish_runs(store, "trg_cu"))
        rep = aio(sched.tick())
        assert [k.split("T")[1][:5] for k in rep.started_from_queue] == [expect]
    assert len(aio(runs_of(store, "trg_cu"))) == 3


def test_catch_up_with_allow_starts_all_at_once(aio, store, clock):
    ir = schedule_ir("trg_cua", "*/10 * * * *", overlap="allow",
                     catch_up={"enabled": True, "max_occurrences": 2, "max_age_ms": None})
    sched = setup(aio, store, clock, ir)
    clock.set(T0 + timedelta(minutes=45))                            # 12:10 .. 12:40 missed (4)
    rep = aio(sched.tick())
    assert sorted(rep.decided.values()) == ["missed", "missed", "started", "started"]
    assert len(rep.runs_created) == 2


def test_crash_between_insert_and_run_is_repaired_once(aio, store, clock):
    ir = schedule_ir("trg_crash", "0 13 * * *")
    sched = setup(aio, store, clock, ir)
    clock.set(T0 + timedelta(hours=1))

    async def crash_after_commit(now, mine, report):   # the daemon dies right after the occurrence commits
        raise SystemExit

    sched._create_runs = crash_after_commit
    try:
        aio(sched.tick())
    except SystemExit:
        pass
    assert aio(occurrences(store, "trg_crash")) == [("trg_crash:2026-03-07T13:00:00+00:00", "started")]
    assert aio(runs_of(store, "trg_crash")) == []
    other = Scheduler(store, clock=clock)
    assert aio(other.tick()).runs_created == {}                    # too fresh: the winner may still be at it
    clock.advance(timedelta(seconds=31))
    rep = aio(other.tick())
    assert list(rep.runs_created) == ["trg_crash:2026-03-07T13:00:00+00:00"]
    again = Scheduler(store, clock=clock)                          # nothing left to repair, nothing duplicated
    assert aio(again.tick()).runs_created == {}
    assert len(aio(runs_of(store, "trg_crash"))) == 1


def test_unpublished_workflow_records_missed_with_code(aio, store, clock):
    ir = schedule_ir("trg_nowf", "0 13 * * *")
    sched = setup(aio, store, clock, ir, publish=False)
    clock.set(T0 + timedelta(hours=1))
    rep = aio(sched.tick())
    assert rep.errors == ["trg_nowf:2026-03-07T13:00:00+00:00: E_WORKFLOW_NOT_FOUND"]
    assert aio(occurrences(store, "trg_nowf")) == [("trg_nowf:2026-03-07T13:00:00+00:00", "missed")]


def test_inactive_trigger_and_occurrences_before_publication(aio, store, clock):
    aio(publish_workflow(store))
    clock.set(T0 + timedelta(hours=3))
    aio(add_trigger(store, schedule_ir("trg_off", "* * * * *"), T0, active=False))
    aio(add_trigger(store, schedule_ir("trg_new", "0 * * * *"), T0 + timedelta(hours=2, minutes=30)))
    rep = aio(Scheduler(store, clock=clock).tick())
    # trg_off is inactive; trg_new was published at 14:30, so 13:00 and 14:00 are not its occurrences
    assert rep.decided == {"trg_new:2026-03-07T15:00:00+00:00": "started"}


def test_next_wake(aio, store, clock):
    ir = schedule_ir("trg_wake", "30 12 * * *")
    sched = setup(aio, store, clock, ir)
    aio(sched.tick())
    assert aio(sched.next_wake()) == T0 + timedelta(minutes=30)    # the firing; the poll is wall time
    clock.set(T0 + timedelta(minutes=29, seconds=58))
    assert aio(sched.next_wake()) == T0 + timedelta(minutes=30)
