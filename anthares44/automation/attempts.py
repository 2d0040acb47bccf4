"""What a run's recorded attempts are: `Attempt` is one row of `step_attempts` (an action or a compensation),
`StepAttempts` the attempts of one step in attempt order. The one model of those rows: the DAG driver's
`Progress`, the code driver and the code-workflow execution's `History`, replay and fixture replay all read and
update these objects, and the journal's `Batch` writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from .errors import E_STEP_TIMEOUT, FREE_RETRY_CODES

KEEPS_RESULT = ("succeeded", "compensated")      # the statuses whose result anything reads back


class Row(Protocol):
    """A row by column name: an asyncpg `Record` or a dict (the core does not import asyncpg)."""

    def __getitem__(self, key: str, /) -> Any: ...
    def get(self, key: str, /) -> Any: ...
    def keys(self) -> Iterable[str]: ...


@dataclass
class Attempt:
    step_id: str
    kind: str                       # action | compensation
    attempt: int
    status: str
    started_at: datetime
    finished_at: datetime | None = None
    error_code: str | None = None
    error_message: str | None = None
    result: Any = None
    retry_at: datetime | None = None
    seq: int | None = None          # log order (the id of the attempt's first event) when the reader asked for it
    due_at: datetime | None = None  # a sleep's due instant, stored when it opened (§19)

    @classmethod
    def from_row(cls, row: Row, load_result: Callable[[dict[str, Any]], Any] | None = None) -> Attempt:
        """A `step_attempts` row (the columns a query left out stay None); `load_result` (the store's) reads a
        kept result, inline or by reference."""
        result = None
        if load_result is not None and row["status"] in KEEPS_RESULT:
            result = load_result(dict(row))
        return cls(row["step_id"], row["kind"], row["attempt"], row["status"], row["started_at"],
                   row["finished_at"], row.get("error_code"), row.get("error_message"), result, row.get("retry_at"),
                   row.get("seq"), row.get("due_at"))

    @property
    def duration_s(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


def failed_status(error_code: str | None) -> str:
    """The status of an attempt that ended in error `error_code`: `timeout` when the step ran out of its time,
    whoever noticed it first (the interpreter's own timer, or a connector or step body that raised E_STEP_TIMEOUT
    with the time it was given), else `failed` (docs/states.md "Attempt statuses")."""
    return "timeout" if error_code == E_STEP_TIMEOUT else "failed"


def counts_against_budget(status: str, error_code: str | None) -> bool:
    """Attempts that use retry budget: real failures and timeouts. An open circuit (§6.3), an upstream 429 or a
    paused flow key (§22) and a lost lease are not the step's fault and do not."""
    return status in ("failed", "timeout") and error_code not in FREE_RETRY_CODES


@dataclass
class StepAttempts:
    actions: list[Attempt] = field(default_factory=list)
    compensations: list[Attempt] = field(default_factory=list)

    def add(self, a: Attempt) -> None:
        (self.actions if a.kind == "action" else self.compensations).append(a)

    def sort(self) -> None:
        self.actions.sort(key=lambda x: x.attempt)
        self.compensations.sort(key=lambda x: x.attempt)

    @property
    def last(self) -> Attempt | None:
        return self.actions[-1] if self.actions else None

    @property
    def last_compensation(self) -> Attempt | None:
        return self.compensations[-1] if self.compensations else None

    @property
    def next_attempt(self) -> int:
        return (self.actions[-1].attempt + 1) if self.actions else 1

    @property
    def next_compensation_attempt(self) -> int:
        return (self.compensations[-1].attempt + 1) if self.compensations else 1

    @property
    def counted_failures(self) -> int:
        return sum(1 for a in self.actions if counts_against_budget(a.status, a.error_code))

    @property
    def counted_compensation_failures(self) -> int:
        return sum(1 for a in self.compensations if a.status in ("failed", "compensation_failed"))

    @property
    def compensated(self) -> bool:
        last = self.last_compensation
        return last is not None and last.status == "compensated"


def latest_finish(steps: Iterable[StepAttempts]) -> datetime | None:
    """The last instant anything in these steps finished: the anchor of the first compensation wait."""
    times = [a.finished_at for s in steps for a in (*s.actions, *s.compensations) if a.finished_at is not None]
    return max(times) if times else None
