"""The store: the only code that executes SQL. It runs the named queries of `queries/*.sql` on an asyncpg pool,
takes every timestamp from the injected clock, and turns driver errors into `A44Error` (db_errors.py).

Other runtime modules (interpreter, ingestion, API) either call the operations below or add their own named
queries in a new `queries/<concern>.sql` and run them by name with named arguments:
`await store.fetch("runs_list", project=..., limit=...)`, or, inside `async with store.transaction(op) as tx`,
`await tx.fetchrow("run_get", run_id=..., project=None)`. Both apply the same error translation; a missing or
unknown argument name is a `TypeError` naming the query, raised before anything is sent.
"""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import asyncpg

from ...clock import Clock, SystemClock
from ...db_errors import translate
from ...errors import (
    E_DB,
    E_DB_SCHEMA,
    E_IDEMPOTENCY_KEY_REQUIRED,
    E_RUN_NOT_FOUND,
    E_VERSION_CONFLICT,
    E_VERSION_REGRESSION,
    E_WORKFLOW_NOT_FOUND,
    A44Error,
)
from ..ulid import new_run_id
from . import compat, pooler
from . import migrate as migrations
from .results import ResultFiles, encode_json
from .session import Connection, Session, _bind, _query
from .vocabulary import load_migrations

# unique violations of the control store that mean something to a user: constraint -> (code, what to tell them)
CONSTRAINT_CODES: dict[str, tuple[str, str]] = {
    "workflow_versions_pkey": (E_VERSION_CONFLICT, "that workflow version was published concurrently; increment "
                                                  "`version` and publish again"),
}
IDEMPOTENCY_WINDOW = timedelta(hours=24)  # §8.2
RUN_WALL_CLOCK_LIMIT = timedelta(hours=72)  # §3.1: the deadline of a run whose IR has no deadline_ms (older versions)

# Run states (docs/store.md has the meaning of each; the interpreter owns the transitions).
RUN_STATES = ("pending", "running", "waiting", "sleeping", "awaiting_confirmation", "compensating",
              "blocked_version", "succeeded", "partial", "failed", "compensation_failed", "cancelled")
TERMINAL_RUN_STATES = frozenset({"succeeded", "partial", "failed", "compensation_failed", "cancelled"})
ATTEMPT_STATUSES = ("running", "succeeded", "failed", "timeout", "skipped", "compensated", "compensation_failed",
                    "lease_expired", "cancelled")
FINISHED_ATTEMPT_STATUSES = frozenset(ATTEMPT_STATUSES) - {"running"}
ATTEMPT_KINDS = ("action", "compensation")


class CreatedRun(NamedTuple):
    run_id: str
    created: bool
    key_age_seconds: float  # 0 for a new run; the age of the original claim otherwise
    version: int


@dataclass(frozen=True)
class RunPage:
    """One page of a run listing and the total that match: the store's rows, or the application's views of them."""
    total: int
    runs: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "runs": self.runs}


@dataclass(frozen=True)
class AttemptRef:
    """Identifies one attempt row (started_at is part of the key: it selects the monthly partition)."""
    run_id: str
    step_id: str
    attempt: int
    epoch: int
    kind: str
    project_id: str
    started_at: datetime


def _jsonb_text(value: str) -> str:
    # Callers hand the store JSON text they encoded (results.encode_json), so the size rule sees the real bytes.
    if not isinstance(value, str):
        raise TypeError("jsonb parameters are passed as JSON text")
    return value


def _session_neutral(name: str) -> bool:
    """A named query that leaves no session state behind (no session advisory lock, LISTEN or SET): a pooled
    connection that ran only such queries needs no reset query when it goes back to the pool."""
    text = _query(name).sql.lower()
    return not (text.lstrip().startswith(("set ", "reset", "listen", "unlisten", "declare", "prepare"))
                or "pg_advisory_lock" in text or _SESSION_SET_CONFIG.search(text) is not None)


_SESSION_SET_CONFIG = re.compile(r"set_config\([^;]*?,\s*false\s*\)")   # is_local = false: outlives the transaction
_NEUTRAL: dict[str, bool] = {}


def _neutral(name: str) -> bool:
    got = _NEUTRAL.get(name)
    if got is None:
        got = _NEUTRAL[name] = _session_neutral(name)
    return got


class _Resets:
    """asyncpg's pool resets every connection it gets back with `SELECT pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL;`: one more round trip and one more transaction per use (docs/runtime.md measured it).
    A use that ran only session-neutral named queries (or a transaction whose caller vouched for it) marks its
    connection here and the release skips that statement; every other use (raw `connection()`, a connector
    borrowing `Store.pool`, a LISTEN) gets the full reset. asyncpg itself still rolls back an open transaction
    and drops listeners. Marks are weak references: a closed connection leaves none behind."""

    def __init__(self) -> None:
        self.clean: weakref.WeakSet[asyncpg.Connection[asyncpg.Record]] = weakref.WeakSet()

    @staticmethod
    def _raw(conn: Connection) -> asyncpg.Connection[asyncpg.Record]:
        raw: asyncpg.Connection[asyncpg.Record] | None = getattr(conn, "_con", None)  # a pool's proxy wraps it
        return raw if raw is not None else conn  # type: ignore[return-value]  # no _con: conn is the connection

    def mark(self, conn: Connection, neutral: bool) -> None:
        raw = self._raw(conn)
        if neutral:
            self.clean.add(raw)
        else:
            self.clean.discard(raw)

    async def __call__(self, conn: asyncpg.Connection[asyncpg.Record]) -> None:
        if conn in self.clean:
            self.clean.discard(conn)
            return
        await conn.execute(conn.get_reset_query())


async def _init_connection(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    for typ in ("jsonb", "json"):
        await conn.set_type_codec(typ, encoder=_jsonb_text, decoder=json.loads, schema="pg_catalog")


class Store:
    def __init__(self, pool: asyncpg.Pool[asyncpg.Record], *, url: str, clock: Clock, results_dir: Path | None = None,
                 resets: _Resets | None = None, storage: Any = None, session_url: str | None = None,
                 pooling: pooler.Pooling = pooler.DIRECT):
        self._pool = pool
        self._resets = resets or _Resets()
        self.url = url
        # LISTEN and session advisory locks go here (runtime/store/pooler.py); None: a pooled connection of `url`
        self.session_url = session_url
        self.pooling = pooling
        self.clock = clock
        # results over 256 KB go to the object store of storage/* (`storage`: any ObjectStore, e.g. S3-compatible;
        # else a local one rooted at `results_dir`, else at $A44_HOME/storage, where storage/put writes)
        self.results = ResultFiles(results_dir, storage=storage)

    # --- lifecycle ---------------------------------------------------------------------------------------
    @classmethod
    async def connect(cls, url: str, *, clock: Clock | None = None, results_dir: Path | None = None,
                      min_size: int = 1, max_size: int = 10, connect_timeout: float = 10,
                      storage: Any = None, session_url: str | None = None) -> Store:
        """A pool on `url`; `session_url` (A44_DATABASE_SESSION_URL) is where LISTEN and session locks go when
        `url` is transaction pooled: through such a pooler the pool runs without a statement cache (pooler.py)."""
        resets = _Resets()
        try:
            pooling = await pooler.probe(url, timeout=connect_timeout)
            pool = await asyncpg.create_pool(url, min_size=min_size, max_size=max_size, init=_init_connection,
                                             timeout=connect_timeout, command_timeout=None, reset=resets,
                                             statement_cache_size=pooling.statement_cache_size,
                                             server_settings=pooling.server_settings)
        except Exception as exc:
            err = translate(exc, operation="connect", url=url, constraints=CONSTRAINT_CODES)
            if err is None:
                raise
            raise err from exc
        return cls(pool, url=url, clock=clock or SystemClock(), results_dir=results_dir, resets=resets,
                   storage=storage, session_url=pooler.session_url_of(url, session_url), pooling=pooling)

    @property
    def pool(self) -> asyncpg.Pool[asyncpg.Record]:
        """The control store's asyncpg pool (for the runtime's own modules; connectors never get it, workflow SQL
        runs on the application database). Connections acquired from it directly get asyncpg's full session reset
        when released."""
        return self._pool

    async def close(self, timeout: float | None = None) -> None:
        """Close the pool once its connections are released; past `timeout` seconds, terminate them (a connection
        stuck in a lock wait would otherwise hold the close forever)."""
        try:
            await asyncio.wait_for(self._pool.close(), timeout)
        except TimeoutError:
            self._pool.terminate()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- running named queries ---------------------------------------------------------------------------
    @asynccontextmanager
    async def connection(self, operation: str, *, session_neutral: bool = False) -> AsyncIterator[Connection]:
        """A pooled connection; driver errors inside the block become A44Error. `session_neutral=True` promises
        the block leaves no session state (no SET without LOCAL, LISTEN, session advisory lock, cursor WITH
        HOLD): the connection then goes back to the pool without asyncpg's reset statement."""
        try:
            async with self._pool.acquire() as conn:
                self._resets.mark(conn, session_neutral)
                yield conn
        except Exception as exc:
            err = translate(exc, operation=operation, url=self.url, constraints=CONSTRAINT_CODES)
            if err is None:
                raise
            if err is exc:
                raise
            raise err from exc

    @asynccontextmanager
    async def session_connection(self, operation: str) -> AsyncIterator[Connection]:
        """A connection that stays one server session for the whole block (LISTEN, session advisory locks): one
        of its own on the session URL when there is one, else a pooled one; E_DB_POOLER when that would be a
        transaction pooler's (pooler.py)."""
        if self.session_url is None:
            if self.pooling.transaction:
                raise pooler.refuse(self.url, operation)
            async with self.connection(operation) as pooled:
                yield pooled
            return
        try:
            conn = await asyncpg.connect(self.session_url, server_settings=pooler.DIRECT.server_settings)
            try:
                await _init_connection(conn)
                yield conn
            finally:
                await asyncio.shield(conn.close())
        except Exception as exc:
            err = translate(exc, operation=operation, url=self.session_url, constraints=CONSTRAINT_CODES)
            if err is None or err is exc:
                raise
            raise err from exc

    async def check_session(self) -> pooler.Pooling:
        """The daemon's start-up check: E_DB_POOLER when its LISTEN would go through a transaction pooler; a
        warning when the pool does (pooler.check_session)."""
        return await pooler.check_session(self.url, self.session_url)

    @asynccontextmanager
    async def session(self, operation: str, *, session_neutral: bool = False) -> AsyncIterator[Session]:
        """A pooled connection running named queries, each statement its own transaction (see `connection`)."""
        async with self.connection(operation, session_neutral=session_neutral) as conn:
            yield Session(conn)

    @asynccontextmanager
    async def transaction(self, operation: str, *, session_neutral: bool = False) -> AsyncIterator[Session]:
        """One transaction on a pooled connection, running named queries (see `connection`)."""
        async with self.connection(operation, session_neutral=session_neutral) as conn:
            async with conn.transaction():
                yield Session(conn)

    # one statement on a pooled connection; the arguments are bound before a connection is taken
    async def fetch(self, name: str, /, **params: Any) -> list[asyncpg.Record]:
        q = _query(name)
        args = _bind(q, params)
        async with self.connection(name, session_neutral=_neutral(name)) as conn:
            return await conn.fetch(q.sql, *args)

    async def fetchrow(self, name: str, /, **params: Any) -> asyncpg.Record | None:
        q = _query(name)
        args = _bind(q, params)
        async with self.connection(name, session_neutral=_neutral(name)) as conn:
            return await conn.fetchrow(q.sql, *args)

    async def fetchval(self, name: str, /, **params: Any) -> Any:
        q = _query(name)
        args = _bind(q, params)
        async with self.connection(name, session_neutral=_neutral(name)) as conn:
            return await conn.fetchval(q.sql, *args)

    async def execute(self, name: str, /, **params: Any) -> str:
        q = _query(name)
        args = _bind(q, params)
        async with self.connection(name, session_neutral=_neutral(name)) as conn:
            return await conn.execute(q.sql, *args)

    # --- schema ------------------------------------------------------------------------------------------
    async def migrate(self, *, destructive: bool = False) -> migrations.MigrationReport:
        """Apply pending migrations; a destructive one only with `destructive` (`db migrate`) or on an empty
        database; E_DB_SCHEMA_RANGE when the database's schema is outside this package's range (compat.py)."""
        async with self.session("migrate") as conn:
            return await migrations.migrate(conn, self.clock.now(), destructive=destructive)

    async def ensure_partitions(self, months_ahead: int = migrations.PARTITION_MONTHS_AHEAD) -> int:
        """Create step_attempts partitions from this month to `months_ahead` later; the daemon calls it at start
        and daily."""
        async with self.session("ensure_partitions") as conn:
            return await migrations.ensure_partitions(conn, self.clock.now(), months_ahead)

    async def schema_info(self) -> dict[str, Any]:
        """Server version and migrations applied / pending, for `db status`."""
        version = await self.fetchval("server_version")
        try:
            rows = await self.fetch("migration_applied")
        except A44Error as exc:
            if exc.code != E_DB_SCHEMA:
                raise
            rows = []
        applied = [r["name"] for r in rows]
        pending = [m.name for m in load_migrations() if m.name not in applied]
        numbers = [r["number"] for r in rows]
        need = await self.fetchrow("schema_compat_need") if await self.fetchval("schema_compat_ready") else None
        return {"server_version_num": version, "applied": applied, "pending": pending,
                "schema": compat.range_info(numbers, dict(need) if need else None, compat.daemon_schema())}

    async def list_partitions(self) -> list[dict[str, Any]]:
        return [dict(r) for r in await self.fetch("partitions_list")]

    # --- workflow versions (§3.8) ------------------------------------------------------------------------
    async def publish_version(self, project: str, workflow_id: str, version: int, sha256: str, ir: dict[str, Any]) -> str:
        """Store `ir` as `version`: 'created', or 'unchanged' when that version exists with the same sha256."""
        async with self.transaction("publish_version") as conn:
            await conn.execute("version_lock", project=project, workflow_id=workflow_id)
            same = await conn.fetchrow("version_get", project=project, workflow_id=workflow_id, version=version)
            if same is not None:
                if same["sha256"] == sha256:
                    return "unchanged"
                raise A44Error(E_VERSION_CONFLICT,
                               f"{workflow_id} version {version} is already published with different steps "
                               f"(sha256 {same['sha256'][:12]}, this one {sha256[:12]})",
                               hint=f"increment `version:` (to {await self._next_version(conn, project, workflow_id)}) "
                                    f"and publish again; runs in flight keep version {version}")
            latest = await conn.fetchrow("version_latest", project=project, workflow_id=workflow_id)
            if latest is not None and latest["version"] > version:
                raise A44Error(E_VERSION_REGRESSION,
                               f"{workflow_id} version {version} is lower than the published version "
                               f"{latest['version']}",
                               hint=f"set `version: {latest['version'] + 1}` (versions only go up)")
            await conn.execute("version_insert", project=project, workflow_id=workflow_id, version=version,
                               sha256=sha256, ir=encode_json(ir), now=self.clock.now())
            return "created"

    @staticmethod
    async def _next_version(conn: Session, project: str, workflow_id: str) -> int:
        latest = await conn.fetchrow("version_latest", project=project, workflow_id=workflow_id)
        return (latest["version"] if latest else 0) + 1

    async def get_version(self, project: str, workflow_id: str, version: int) -> dict[str, Any]:
        row = await self.fetchrow("version_get", project=project, workflow_id=workflow_id, version=version)
        if row is None:
            raise A44Error(E_WORKFLOW_NOT_FOUND, f"{workflow_id} version {version} is not published in {project}",
                           hint="`a44 automation publish FILE` first")
        return dict(row)

    async def latest_version(self, project: str, workflow_id: str) -> dict[str, Any]:
        row = await self.fetchrow("version_latest", project=project, workflow_id=workflow_id)
        if row is None:
            raise A44Error(E_WORKFLOW_NOT_FOUND, f"no version of {workflow_id} is published in {project}",
                           hint="`a44 automation publish FILE` first")
        return dict(row)

    # --- runs (§8.2, §8.5) -------------------------------------------------------------------------------
    async def create_run(self, project: str, workflow_id: str, input: Any, idempotency_key: str, *,
                         trigger_id: str | None = None, partition_key: str | None = None, queue: str | None = None,
                         event_id: str | None = None, version: int | None = None,
                         initiator: str | None = None) -> CreatedRun:
        """Create a pending run of the latest (or the given) version, unless `idempotency_key` was claimed in
        the last 24 h: then nothing is created and the original run id is returned (created=False). `initiator`:
        the name behind the call (an API token's, `local:<os user>`), recorded with the run (docs/approvals.md)."""
        if not idempotency_key or not idempotency_key.strip():
            raise A44Error(E_IDEMPOTENCY_KEY_REQUIRED, "a run needs a non-empty idempotency key",
                           hint="pass --idempotency-key K (the same K within 24 h returns the original run)")
        for _ in range(3):
            now = self.clock.now()
            run_id = new_run_id(now)
            who = {} if initiator is None else {"initiator": initiator}
            row = await self.fetchrow("run_create" if initiator is None else "run_create_initiated",
                                      project=project, workflow_id=workflow_id, version=version,
                                      run_id=run_id, input=encode_json(input), key=idempotency_key,
                                      trigger_id=trigger_id, partition_key=partition_key, queue=queue, now=now,
                                      window=IDEMPOTENCY_WINDOW, deadline=now + RUN_WALL_CLOCK_LIMIT, event_id=event_id,
                                      **who)
            assert row is not None  # run_create selects two scalar subqueries, no FROM: always one row
            if row["version"] is None:
                which = f"version {version} of {workflow_id}" if version is not None else workflow_id
                raise A44Error(E_WORKFLOW_NOT_FOUND, f"{which} is not published in {project}",
                               hint="`a44 automation publish FILE` first")
            if row["created_run_id"] is not None:
                return CreatedRun(run_id, True, 0.0, row["version"])
            # The key is held by a run younger than the window. Read it in a new statement: a concurrent
            # creator that just committed is visible now, while it was not in the insert's snapshot.
            held = await self.fetchrow("idempotency_key_get", project=project, key=idempotency_key)
            if held is not None:
                age = max(0.0, (now - held["created_at"]).total_seconds())
                return CreatedRun(held["run_id"], False, age, row["version"])
            # the holder rolled back or was purged in between: claim again
        raise A44Error(E_DB, f"idempotency key {idempotency_key!r} kept changing hands; try again")

    async def get_run(self, run_id: str, project: str | None = None) -> dict[str, Any]:
        row = await self.fetchrow("run_get", run_id=run_id, project=project)
        if row is None:
            raise A44Error(E_RUN_NOT_FOUND, f"no run {run_id}" + (f" in {project}" if project else ""),
                           hint="`a44 automation runs` lists the runs")
        return dict(row)

    async def list_runs(self, project: str, *, state: str | None = None, workflow: str | None = None,
                        step: str | None = None, since: datetime | timedelta | None = None, limit: int = 50,
                        offset: int = 0) -> RunPage:
        """Runs newest first, with the total that match. `step` matches runs whose current or failed step is
        it, or that have an attempt of it; `since` is an instant or an age (48 h -> created in the last 48 h)."""
        if isinstance(since, timedelta):
            since = self.clock.now() - since
        where = dict(project=project, state=state, workflow=workflow, step=step, since=since)
        async with self.session("list_runs") as conn:
            total = await conn.fetchval("runs_count", **where)
            rows = await conn.fetch("runs_list", **where, limit=limit, offset=offset)
        return RunPage(total=total, runs=[dict(r) for r in rows])

    # --- step attempts (§7.4) ----------------------------------------------------------------------------
    async def record_attempt_start(self, run_id: str, step_id: str, attempt: int, *, project: str,
                                   idempotency_key: str | None = None, epoch: int = 0, kind: str = "action",
                                   worker_id: str | None = None, lease_grant: int | None = None,
                                   started_at: datetime | None = None) -> AttemptRef:
        """Write the attempt's row (status running) before the attempt runs."""
        if kind not in ATTEMPT_KINDS:
            raise ValueError(f"attempt kind must be one of {ATTEMPT_KINDS}")
        started_at = started_at or self.clock.now()
        key = idempotency_key or f"{run_id}:{step_id}"  # §2: the per-step key every connector receives
        await self.fetchval("attempt_start", run_id=run_id, step_id=step_id, attempt=attempt, key=key,
                            started_at=started_at, epoch=epoch, kind=kind, project=project, worker_id=worker_id,
                            lease_grant=lease_grant)
        return AttemptRef(run_id, step_id, attempt, epoch, kind, project, started_at)

    async def record_attempt_finish(self, ref: AttemptRef, status: str, *, result: Any = None,
                                    error_code: str | None = None, error_message: str | None = None,
                                    finished_at: datetime | None = None) -> dict[str, Any]:
        """Finish a running attempt. Results over 256 KB go to the object store first (`_results/...` under the
        project) and the row keeps its `a44-storage://` reference.
        Returns {'result_ref', 'result_bytes'}. A44Error E_DB if the attempt is not running any more."""
        if status not in FINISHED_ATTEMPT_STATUSES:
            raise ValueError(f"an attempt finishes with one of {sorted(FINISHED_ATTEMPT_STATUSES)}, not {status!r}")
        stored = self.results.store(result, project_id=ref.project_id, run_id=ref.run_id, step_id=ref.step_id,
                                    epoch=ref.epoch, kind=ref.kind, attempt=ref.attempt)
        finished_at = finished_at or self.clock.now()
        event_id = await self.fetchval("attempt_finish", run_id=ref.run_id, step_id=ref.step_id, epoch=ref.epoch,
                                       kind=ref.kind, attempt=ref.attempt, started_at=ref.started_at, status=status,
                                       error_code=error_code, error_message=error_message, result=stored.inline,
                                       result_ref=stored.ref, result_bytes=stored.size, finished_at=finished_at)
        if event_id is None:
            raise A44Error(E_DB, f"attempt {ref.attempt} of step {ref.step_id} in {ref.run_id} is not running "
                                 f"(finished already, or its lease expired); refusing to overwrite it",
                           step_id=ref.step_id)
        return {"result_ref": stored.ref, "result_bytes": stored.size}

    async def list_attempts(self, run_id: str) -> list[dict[str, Any]]:
        return [dict(r) for r in await self.fetch("attempts_list", run_id=run_id)]

    def load_result(self, attempt_row: dict[str, Any]) -> Any:
        """The attempt's result, reading the object (or, for rows written by older versions, the `file://`
        file) when the row holds a reference."""
        if attempt_row.get("result_ref"):
            return self.results.load(attempt_row["result_ref"])
        return attempt_row.get("result")

    # --- run events --------------------------------------------------------------------------------------
    async def append_run_event(self, run_id: str, project: str, kind: str, *, state: str | None = None,
                               step_id: str | None = None, attempt: int | None = None, status: str | None = None,
                               error_code: str | None = None, message: str | None = None,
                               data: Any = None, at: datetime | None = None) -> int:
        event_id: int = await self.fetchval("run_event_append", run_id=run_id, project=project,
                                            at=at or self.clock.now(), kind=kind, state=state, step_id=step_id,
                                            attempt=attempt, status=status, error_code=error_code, message=message,
                                            data=None if data is None else encode_json(data))
        return event_id

    async def list_run_events(self, run_id: str, after_id: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        return [dict(r) for r in await self.fetch("run_events_list", run_id=run_id, after_id=after_id, limit=limit)]
