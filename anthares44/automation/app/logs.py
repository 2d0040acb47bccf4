"""`logs query`: the arguments of a log query checked and turned into a filter, then answered from the hot rows
(PostgreSQL) or, with `archive`, from the Parquet days of the cold store (runtime/logs); `logs archive`: one pass
of the retention that moves hot rows to the archive and drops what is past it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..durations import parse_duration
from ..errors import E_INVALID_ARGUMENT, E_LOG_LIMIT, A44Error
from ..runtime.logs.query import DEFAULT_LIMIT, MAX_LIMIT, Cursor, LogFilter, LogPage, query_hot

DEFAULT_SINCE = "24h"


def instant(name: str, value, now: datetime) -> datetime:
    """An age (`7d`: that long before now) or an ISO 8601 instant (UTC unless it says otherwise)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, timedelta):
        return now - value
    try:
        return now - parse_duration(value)
    except ValueError:
        pass
    try:
        at = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise A44Error(E_INVALID_ARGUMENT, f"--{name} {value!r} is neither an age nor an instant",
                       hint="an age such as 7d, 36h, 30m, or an instant such as 2026-07-19T14:00:00Z") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def check_limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise A44Error(E_INVALID_ARGUMENT, f"--limit must be a whole number from 1 to {MAX_LIMIT:,}")
    if limit > MAX_LIMIT:
        raise A44Error(E_LOG_LIMIT, f"--limit {limit:,} is over the {MAX_LIMIT:,} rows one answer may hold",
                       hint=f"ask for at most {MAX_LIMIT:,} and page with --after NEXT (each answer prints its "
                            f"`next` cursor when more rows match)")
    return limit


def log_filter(project: str, now: datetime, *, since=None, until=None, error_code: str | None = None,
               step: str | None = None, workflow: str | None = None, partition_key: str | None = None) -> LogFilter:
    lo = instant("since", since if since is not None else DEFAULT_SINCE, now)
    hi = instant("until", until, now) if until is not None else now + timedelta(seconds=1)
    if hi <= lo:
        raise A44Error(E_INVALID_ARGUMENT, "--until is not after --since", hint="--since 7d --until 1d: from 7 to 1 "
                                                                                 "days ago")
    return LogFilter(project, lo, hi, error_code or None, step or None, workflow or None, partition_key or None)


async def query_logs(store, f: LogFilter, *, limit: int = DEFAULT_LIMIT, after: str | None = None,
                     archive_dir: Path | None = None) -> LogPage:
    """One page of the log query `f`: from PostgreSQL, or from the archive under `archive_dir` when given."""
    check_limit(limit)
    cursor = Cursor.decode(after) if after else None
    if archive_dir is None:
        return await query_hot(store, f, limit, cursor)
    from ..runtime.logs.archive import query_archive

    return await query_archive(archive_dir, f, limit, cursor)


async def archive_logs(store, archive_dir: Path, settings, *, dry_run: bool = False):
    """One retention pass with the hot days and archive months of `settings` (settings.Settings; the retention's
    defaults when unset): the RetentionReport, or what it would do with `dry_run`."""
    from ..runtime.logs.retention import ARCHIVE_MONTHS, HOT_DAYS, run_retention

    return await run_retention(store, archive_dir, hot_days=settings.log_hot_days or HOT_DAYS,
                               archive_months=settings.log_archive_months or ARCHIVE_MONTHS, dry_run=dry_run)
