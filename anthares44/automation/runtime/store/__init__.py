"""The control store: the only code that speaks SQL to it (core.py: the pool and named queries; session.py: a borrowed connection), the
vocabulary of named queries (vocabulary.py, queries/*.sql), the migrations (migrate.py, migrations/*.sql) and their
committed result (schema.sql, schema_dump.py), and step results kept inline or in object storage (results.py)."""

from .core import (
    ATTEMPT_KINDS,
    ATTEMPT_STATUSES,
    FINISHED_ATTEMPT_STATUSES,
    IDEMPOTENCY_WINDOW,
    RUN_STATES,
    RUN_WALL_CLOCK_LIMIT,
    TERMINAL_RUN_STATES,
    AttemptRef,
    CreatedRun,
    RunPage,
    Store,
)
from .session import Session

__all__ = ["ATTEMPT_KINDS", "ATTEMPT_STATUSES", "FINISHED_ATTEMPT_STATUSES", "IDEMPOTENCY_WINDOW", "RUN_STATES",
           "RUN_WALL_CLOCK_LIMIT", "TERMINAL_RUN_STATES", "AttemptRef", "CreatedRun", "RunPage", "Session", "Store"]
