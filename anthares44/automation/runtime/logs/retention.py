"""Log retention: attempts older than the hot retention go to the Parquet archive day by day, then their month
partitions are dropped; runs (with their events, idempotency keys and trace context) that ended before the
oldest month still in PostgreSQL are deleted in bounded batches; archive days older than the cold retention are
deleted.

Order makes a crash harmless at any point: a day's file is written (atomically) before the day is recorded, and
a month is dropped only when the records cover every row of it (`drop_archived_attempt_month` counts), so a
kill leaves at worst a day rewritten next time, never a row lost or doubled. Runs go only after their attempts'
month is gone, so deleting a run never cascades into attempts still waiting to be archived (and never turns a
partition drop into a long DELETE). runs and run_events are not partitioned: a batch is at most `batch` runs.

One process runs it at a time: a session advisory lock taken with try-lock; another daemon that finds it taken
skips its round (RetentionReport.skipped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from . import archive

HOT_DAYS = 30           # A44_LOG_HOT_DAYS
ARCHIVE_MONTHS = 13     # A44_LOG_ARCHIVE_MONTHS
RUN_BATCH = 500
_MONTH = re.compile(r"^step_attempts_y(\d{4})m(\d{2})$")


@dataclass
class RetentionReport:
    dry_run: bool = False
    skipped: bool = False                                 # another process holds the retention lock
    hot_cutoff: datetime | None = None
    archived_days: list[dict] = field(default_factory=list)   # {day, rows}
    dropped_months: list[dict] = field(default_factory=list)  # {partition, rows}
    deleted_runs: int = 0
    deleted_archive_days: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"dry_run": self.dry_run, "skipped": self.skipped, "hot_cutoff": self.hot_cutoff,
                "archived_days": self.archived_days, "dropped_months": self.dropped_months,
                "deleted_runs": self.deleted_runs, "deleted_archive_days": self.deleted_archive_days}


def month_bounds(name: str) -> tuple[datetime, datetime] | None:
    m = _MONTH.match(name)
    if m is None:
        return None
    year, month = int(m.group(1)), int(m.group(2))
    lo = datetime(year, month, 1, tzinfo=UTC)
    hi = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return lo, hi


def months_before(day: date, months: int) -> date:
    total = day.year * 12 + day.month - 1 - months
    return date(total // 12, total % 12 + 1, 1)


def _day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


async def run_retention(store, root: Path, *, hot_days: int = HOT_DAYS, archive_months: int = ARCHIVE_MONTHS,
                        dry_run: bool = False, batch: int = RUN_BATCH) -> RetentionReport:
    """One round of retention under the advisory lock (skipped when another process holds it)."""
    from ..store.session import Session

    archive.pyarrow()   # the one coded error before anything is touched
    now = store.clock.now()
    report = RetentionReport(dry_run=dry_run)
    report.hot_cutoff = cutoff = _day_start((now - timedelta(days=hot_days)).astimezone(UTC).date())
    async with store.session_connection("log_retention") as held:     # a session advisory lock: one session
        lock = Session(held)
        if not await lock.fetchval("logs_retention_try_lock"):
            report.skipped = True
            return report
        try:
            await _archive_days(store, root, cutoff, report, dry_run)
            bound = await _drop_months(store, cutoff, report, dry_run)
            if not dry_run:
                while True:
                    gone = await store.fetch("logs_runs_delete", before=bound, batch=batch)
                    report.deleted_runs += len(gone)
                    if len(gone) < batch:
                        break
            await _expire_archive(store, root, months_before(now.date(), archive_months), report, dry_run)
        finally:
            await lock.fetchval("logs_retention_unlock")
    return report


async def _archive_days(store, root: Path, cutoff: datetime, report: RetentionReport, dry_run: bool) -> None:
    for row in await store.fetch("logs_days_to_archive", cutoff=cutoff):
        day = row["day"]
        report.archived_days.append({"day": day.isoformat(), "rows": row["rows"]})
        if dry_run:
            continue
        lo = _day_start(day)
        rows = [dict(r) for r in await store.fetch("logs_day_rows", lo=lo, hi=lo + timedelta(days=1))]
        path = await _to_thread(archive.write_day, root, day, rows)
        await store.execute("logs_day_record", day=day, rows=len(rows), path=str(path), now=store.clock.now())


async def _drop_months(store, cutoff: datetime, report: RetentionReport, dry_run: bool) -> datetime:
    """Drop the fully archived months that end by `cutoff`; the start of the oldest month left (runs that ended
    before it have no attempt left in PostgreSQL), at most `cutoff`."""
    oldest_left = cutoff
    for part in await store.list_partitions():
        bounds = month_bounds(part["name"])
        if bounds is None:
            continue
        lo, hi = bounds
        if hi > cutoff:
            oldest_left = min(oldest_left, lo)
            continue
        if dry_run:
            report.dropped_months.append({"partition": part["name"], "rows": None})
            continue
        rows = await store.fetchval("logs_month_drop", name=part["name"], lo=lo, hi=hi)
        if rows is None:
            oldest_left = min(oldest_left, lo)   # not fully archived yet: its runs stay
        else:
            report.dropped_months.append({"partition": part["name"], "rows": rows})
    return oldest_left


async def _expire_archive(store, root: Path, before: date, report: RetentionReport, dry_run: bool) -> None:
    old = [d for d in await _to_thread(archive.archived_days, root) if d < before]
    report.deleted_archive_days = [d.isoformat() for d in old]
    if dry_run:
        return
    for day in old:
        await _to_thread(archive.delete_day, root, day)
    await store.execute("logs_archive_day_forget", before=before)


async def _to_thread(fn, *args):
    import asyncio

    return await asyncio.to_thread(fn, *args)


async def retention_loop(store, root: Path, stop, *, hot_days: int = HOT_DAYS, archive_months: int = ARCHIVE_MONTHS,
                         every: float = 3600.0, first_after: float = 60.0) -> None:
    """The daemon's retention: a round `first_after` seconds after start, then every `every` seconds of the store's
    clock (the cutoffs are instants of that clock: a VirtualClock moved by a month archives a month), until `stop`
    (an asyncio.Event) is set. Each daemon runs the loop; the advisory lock lets one of them work at a time. Without
    pyarrow it says so once and ends (hot rows then stay: nothing is dropped that was not archived)."""
    import logging

    from ...clock import wait_event
    from ...errors import E_ARCHIVE_UNAVAILABLE, A44Error

    log = logging.getLogger("a44.retention")
    due = store.clock.now() + timedelta(seconds=first_after)
    while not stop.is_set():
        if await wait_event(store.clock, stop, due):
            return
        due = store.clock.now() + timedelta(seconds=every)
        try:
            report = await run_retention(store, root, hot_days=hot_days, archive_months=archive_months)
        except A44Error as exc:
            if exc.code == E_ARCHIVE_UNAVAILABLE:
                log.warning("log retention is off: %s (%s); attempts stay in PostgreSQL", exc.message, exc.hint)
                return
            log.warning("log retention round failed: %s; next round in %.0fs", exc, every)
            continue
        if report.archived_days or report.dropped_months or report.deleted_runs or report.deleted_archive_days:
            log.info("log retention: archived %d day(s), dropped %s, deleted %d run(s), expired %d archive day(s)",
                     len(report.archived_days), ", ".join(m["partition"] for m in report.dropped_months) or "no month",
                     report.deleted_runs, len(report.deleted_archive_days))
