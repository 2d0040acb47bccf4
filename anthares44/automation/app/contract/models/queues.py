"""Queues and the dead-letter queue: stats, list, show, redrive."""

from __future__ import annotations

from pydantic import Field

from .common import Age, Body, Doc, Text


class QueueStats(Doc):
    queues: list[dict] = Field(description="per queue: queue, ordering, max_concurrency, in_flight, waiting, "
                                           "oldest_waiting_age_s, dlq_depth")


class DeadLetters(Doc):
    dead_letters: list[dict]


class DlqStats(Doc):
    queue: str
    total: int
    since: str | None
    by_error_code: list[dict]


class DeadLetter(Doc):
    dead_letter_id: str
    queue: str | None
    envelope: object
    last_error: dict
    attempts: int


class RedriveRequest(Body):
    filter: Text | None = Field(None, description="CEL over the DLQ row, e.g. error_code == 'E_UPSTREAM_503'")
    rate: Age | None = Field(None, description="at most this many per second: 20/s, 600/m")
    max: int | None = Field(None, ge=0, le=2 ** 31 - 1)
    dry_run: bool = False


class RedriveReport(Doc):
    queue: str
    dry_run: bool
    scanned: int
    matched: int
    redriven: int
    dead_lettered_again: int
    skipped_taken: int
    elapsed_s: float
    runs: list[dict]
