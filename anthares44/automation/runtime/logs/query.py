"""Log queries over step attempts: the filter, the keyset cursor and the page, and the query of the hot rows.

Rows come newest first, ordered by (started_at, run_id, step_id, epoch, kind, attempt) descending, the attempt's
identity; a cursor is the last row's key, so the next page starts strictly after it whatever was written since.
The same order and cursor apply to the archive (archive.py), so a page reads the same from either.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ...errors import E_LOG_CURSOR, A44Error

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000          # the manual's ceiling per answer: more is refused, never cut silently
ROW_KEYS = ("started_at", "finished_at", "duration_ms", "run_id", "workflow_id", "version", "step_id", "attempt",
            "epoch", "kind", "status", "error_code", "error_message", "partition_key", "queue", "worker_id")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class LogFilter:
    project: str
    since: datetime
    until: datetime
    error_code: str | None = None
    step: str | None = None
    workflow: str | None = None
    partition_key: str | None = None

    def matches(self, row: dict) -> bool:
        """The filter on one row (the archive's rows; the hot rows are filtered by SQL)."""
        return (row["project_id"] == self.project and self.since <= row["started_at"] < self.until
                and all(want is None or row[col] == want for col, want in
                        (("error_code", self.error_code), ("step_id", self.step), ("workflow_id", self.workflow),
                         ("partition_key", self.partition_key))))


@dataclass(frozen=True)
class Cursor:
    started_at: datetime
    run_id: str
    step_id: str
    epoch: int
    kind: str
    attempt: int

    @classmethod
    def of(cls, row: dict) -> Cursor:
        return cls(row["started_at"], row["run_id"], row["step_id"], row["epoch"], row["kind"], row["attempt"])

    def encode(self) -> str:
        micros = (self.started_at - _EPOCH) // timedelta(microseconds=1)
        raw = json.dumps([micros, self.run_id, self.step_id, self.epoch, self.kind, self.attempt],
                         separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            raw = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            micros, run_id, step_id, epoch, kind, attempt = raw
            if not (isinstance(micros, int) and isinstance(epoch, int) and isinstance(attempt, int)
                    and all(isinstance(s, str) for s in (run_id, step_id, kind))):
                raise ValueError
            return cls(_EPOCH + timedelta(microseconds=micros), run_id, step_id, epoch, kind, attempt)
        except (ValueError, TypeError, OverflowError, json.JSONDecodeError, UnicodeDecodeError):
            raise A44Error(E_LOG_CURSOR, "the --after cursor is not one a log query printed",
                           hint="pass the `next` value of the previous answer unchanged") from None

    def key(self) -> tuple:
        return (self.started_at, self.run_id, self.step_id, self.epoch, self.kind, self.attempt)


def sort_key(row: dict) -> tuple:
    return Cursor.of(row).key()


@dataclass
class LogPage:
    """At most `limit` rows; `truncated` when more match, and then `next` is the cursor of the following page."""
    rows: list[dict]
    limit: int
    truncated: bool = False
    next: str | None = None
    source: str = "hot"
    scanned: dict = field(default_factory=dict)

    @classmethod
    def of(cls, rows: list[dict], limit: int, source: str) -> LogPage:
        more = len(rows) > limit
        rows = rows[:limit]
        return cls([view(r) for r in rows], limit, more, Cursor.of(rows[-1]).encode() if more else None, source)

    def to_dict(self) -> dict:
        return {"source": self.source, "count": len(self.rows), "limit": self.limit, "truncated": self.truncated,
                "next": self.next, "rows": self.rows}


def view(row: dict) -> dict:
    doc = {k: row.get(k) for k in ROW_KEYS}
    done = row.get("finished_at")
    doc["duration_ms"] = None if done is None else round((done - row["started_at"]).total_seconds() * 1000)
    return doc


def hot_params(f: LogFilter, limit: int, after: Cursor | None = None) -> dict:
    """The parameters of the named query `logs_query` for `f` (one row more than `limit`: is there more?)."""
    cur = dict(after_at=None, after_run=None, after_step=None, after_epoch=None, after_kind=None, after_attempt=None)
    if after is not None:
        cur = dict(after_at=after.started_at, after_run=after.run_id, after_step=after.step_id,
                   after_epoch=after.epoch, after_kind=after.kind, after_attempt=after.attempt)
    return dict(project=f.project, since=f.since, until=f.until, error_code=f.error_code, step=f.step,
                workflow=f.workflow, partition_key=f.partition_key, limit=limit + 1, **cur)


async def query_hot(store, f: LogFilter, limit: int, after: Cursor | None = None) -> LogPage:
    """The hot rows (PostgreSQL) of `f`, planned for these parameters (an unused filter drops out of the plan)."""
    async with store.transaction("logs_query", session_neutral=True) as tx:   # SET LOCAL ends with it
        await tx.execute("logs_custom_plans")
        rows = await tx.fetch("logs_query", **hot_params(f, limit, after))
    return LogPage.of([dict(r) for r in rows], limit, "hot")
