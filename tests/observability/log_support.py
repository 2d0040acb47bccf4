"""Attempts written straight into the control store for log-query and retention tests: a published version, runs
and their finished attempts at chosen instants (months apart when a test needs it), as the interpreter leaves
them. `Row` is what a test expects a query to return."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

P = "pj_logs"


@dataclass(frozen=True)
class Row:
    run_id: str
    workflow_id: str
    partition_key: str | None
    step_id: str
    attempt: int
    status: str
    error_code: str | None
    started_at: datetime

    def key(self) -> tuple:
        return (self.started_at, self.run_id, self.step_id, 0, "action", self.attempt)


async def seed(store, rows: list[Row], project: str = P) -> None:
    """Insert the versions, runs (terminal, ended at their last attempt) and attempts of `rows`; the month
    partitions of their instants are created first, as a daemon running then would have."""
    async with store.connection("test_seed_logs") as conn, conn.transaction():
        for wf in sorted({r.workflow_id for r in rows}):
            await conn.execute("insert into automation.workflow_versions values ($1, $2, 1, 'sha', '{}', $3) "
                               "on conflict do nothing", project, wf, min(r.started_at for r in rows))
        for at in sorted({r.started_at.replace(day=1, hour=0, minute=0, second=0, microsecond=0) for r in rows}):
            await conn.execute("select automation.ensure_step_attempt_partitions($1, 0)", at)
        runs: dict[str, list[Row]] = {}
        for r in rows:
            runs.setdefault(r.run_id, []).append(r)
        for run_id, mine in runs.items():
            first, last = min(m.started_at for m in mine), max(m.started_at for m in mine)
            await conn.execute(
                "insert into automation.runs (run_id, project_id, workflow_id, version, state, idempotency_key, "
                "partition_key, deadline_at, created_at, started_at, finished_at, updated_at) "
                "values ($1, $2, $3, 1, 'failed', $1, $4, $5::timestamptz + interval '72 hours', $5, $5, $6, $6)",
                run_id, project, mine[0].workflow_id, mine[0].partition_key, first, last + timedelta(seconds=1))
            await conn.execute("insert into automation.run_events (run_id, project_id, at, kind, state) "
                               "values ($1, $2, $3, 'run.state', 'failed')", run_id, project, last)
            await conn.execute("insert into automation.run_trace_context values ($1, $2, $3, $4, null)",
                               project, run_id, first, f"00-{'1' * 32}-{'2' * 16}-01")
        await conn.executemany(
            "insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, error_code, "
            "started_at, finished_at, project_id, worker_id) values ($1, $2, $3, $1, $4, $5, $6, "
            "$6::timestamptz + interval '120 milliseconds', $7, 'w1')",
            [(r.run_id, r.step_id, r.attempt, r.status, r.error_code, r.started_at, project) for r in rows])


def spread(start: datetime, n: int, step: timedelta, *, runs: int = 5, prefix: str = "run_") -> list[Row]:
    """`n` attempts from `start` on, `step` apart, over `runs` runs of two workflows, three steps, two partition
    keys and a mix of outcomes: enough variety for every filter to select a strict subset."""
    out = []
    for i in range(n):
        run = i % runs
        failed = i % 3 == 0
        out.append(Row(run_id=f"{prefix}{run:04d}", workflow_id="wf_settle" if run % 2 == 0 else "wf_refund",
                       partition_key=f"acct_{run % 2}" if run != 4 else None,
                       step_id=("reserve", "charge", "notify")[i % 3],
                       attempt=1 + i // runs, status="failed" if failed else "succeeded",
                       error_code=("E_UPSTREAM_503" if i % 2 else "E_NETWORK") if failed else None,
                       started_at=start + step * i))
    return out
