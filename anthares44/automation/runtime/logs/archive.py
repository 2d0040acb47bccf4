"""The cold store of step attempts: one Parquet file per UTC day, `<root>/attempts/day=YYYY-MM-DD/attempts.parquet`
(Hive-style, so pyarrow.dataset, DuckDB or Spark read the tree as one table partitioned by `day`).

A day's file holds every attempt that started that day, with the run's workflow, version, partition key and
queue copied in, so the archive answers `logs query --archive` after the runs themselves are gone. A file is
written under a temporary name, flushed to disk and renamed over the final name: a reader (or a crash) sees the
old file or the new one, never half of one. Writing the same day twice leaves one file, so rewriting a day
after a crash cannot double a row.

pyarrow is the optional extra `archive`; without it every entry point here raises E_ARCHIVE_UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from ...errors import E_ARCHIVE, E_ARCHIVE_UNAVAILABLE, A44Error
from .query import Cursor, LogFilter, LogPage, sort_key

FILE = "attempts.parquet"
COLUMNS = (("project_id", "string"), ("run_id", "string"), ("step_id", "string"), ("attempt", "int32"),
           ("epoch", "int32"), ("kind", "string"), ("status", "string"), ("error_code", "string"),
           ("error_message", "string"), ("started_at", "timestamp"), ("finished_at", "timestamp"),
           ("worker_id", "string"), ("workflow_id", "string"), ("version", "int32"), ("partition_key", "string"),
           ("queue", "string"))


def pyarrow():
    """(pyarrow, pyarrow.parquet), or the one coded error saying how to install them."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise A44Error(E_ARCHIVE_UNAVAILABLE, "the log archive (Parquet) needs pyarrow, which is not installed",
                       hint="pip install 'anthares44-automation[archive]'") from None
    return pa, pq


def _schema(pa):
    kinds = {"string": pa.string(), "int32": pa.int32(), "timestamp": pa.timestamp("us", tz="UTC")}
    return pa.schema([(name, kinds[kind]) for name, kind in COLUMNS])


def day_dir(root: Path, day: date) -> Path:
    return root / "attempts" / f"day={day.isoformat()}"


def day_path(root: Path, day: date) -> Path:
    return day_dir(root, day) / FILE


def write_day(root: Path, day: date, rows: list[dict]) -> Path:
    """Write `rows` as the day's file, atomically (temporary file, fsync, rename, fsync of the directory)."""
    pa, pq = pyarrow()
    target = day_path(root, day)
    tmp = target.with_name(f".{FILE}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        for stale in target.parent.glob(f".{FILE}.*.tmp"):   # left by a writer killed mid-write
            stale.unlink(missing_ok=True)
        table = pa.Table.from_pylist([{name: r.get(name) for name, _ in COLUMNS} for r in rows], schema=_schema(pa))
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise A44Error(E_ARCHIVE, f"cannot write {target}: {exc.strerror or exc}",
                       hint="check the directory's permissions and free space (A44_LOG_ARCHIVE_DIR)") from None
    finally:
        tmp.unlink(missing_ok=True)
    return target


def read_day(root: Path, day: date) -> list[dict]:
    pa, pq = pyarrow()
    path = day_path(root, day)
    try:
        return pq.read_table(path, schema=_schema(pa)).to_pylist()
    except FileNotFoundError:
        return []
    except (OSError, pa.ArrowException) as exc:
        raise A44Error(E_ARCHIVE, f"cannot read {path}: {exc}") from None


def archived_days(root: Path) -> list[date]:
    """The days that have a file, oldest first (a temporary file left by a crash is not a day)."""
    base = root / "attempts"
    if not base.is_dir():
        return []
    days = []
    for d in base.iterdir():
        if d.name.startswith("day=") and (d / FILE).is_file():
            try:
                days.append(date.fromisoformat(d.name[4:]))
            except ValueError:
                continue
    return sorted(days)


def delete_day(root: Path, day: date) -> None:
    shutil.rmtree(day_dir(root, day), ignore_errors=True)


def _days(lo: datetime, hi: datetime) -> list[date]:
    first = lo.astimezone(UTC).date()
    last = (hi - timedelta(microseconds=1)).astimezone(UTC).date()
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def _query(root: Path, f: LogFilter, limit: int, after: Cursor | None) -> LogPage:
    pyarrow()   # refuse before reading anything
    lo, hi = f.since, f.until if after is None else min(f.until, after.started_at + timedelta(microseconds=1))
    have = set(archived_days(root))
    rows: list[dict] = []
    for day in reversed(_days(lo, hi)):    # newest day first: stop once a page is full
        if day not in have:
            continue
        found = [r for r in read_day(root, day) if f.matches(r) and (after is None or sort_key(r) < after.key())]
        rows.extend(sorted(found, key=sort_key, reverse=True))
        if len(rows) > limit:
            break
    return LogPage.of(rows, limit, "archive")


async def query_archive(root: Path, f: LogFilter, limit: int, after: Cursor | None = None) -> LogPage:
    """The archived rows of `f`, in the order and pages of the hot query (files are read in a thread)."""
    return await asyncio.to_thread(_query, root, f, limit, after)
