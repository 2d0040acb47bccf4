"""`uses: sql/execute` (§14): one parameterized statement on the workflow's own database, never the control store.

Where it runs: `dsnSecretRef` (the step's, else the declared connector's) names a secret holding a PostgreSQL
DSN; without one, the statement runs on the step's project's own application database, through that project's pool
of the `AppDatabase` the engine passes as `ctx.services["app_db"]` (sql_database.py: the embedded server's database
of the project, or `A44_APP_DATABASE_URL` with `{project}`). Either way the connection passes the wall of
sql_database.py first (no control schema, not the daemon's role, no server-level powers, no other session's
statements). Pools for DSNs are made on first use and kept per connector instance (closed by `aclose()`), one per
event loop.

Values are never spliced: `params` are bound to `$1`, `$2`... after adaptation to the placeholder types
(sql_values.py). The seed's effect guard works as written: `insert ... values ($1, $2, ...) on conflict (run_id,
step_id) do nothing` with `params: ["{{ run.id }}", "{{ run.step_id }}", ...]`.

Result: `{"rowCount": n, "rows": [...], "truncated": bool}`; `rowCount` comes from the command status
(`UPDATE 3` -> 3), `rows` are the returned rows as JSON, at most `maxRows`.
Errors: the database refusing the statement is `E_SQL` (permanent, with the SQLSTATE), or `E_SQL_FORBIDDEN` when
the role lacks the privilege (SQLSTATE 42501: `copy ... to program`, another role's table); serialization
failures, deadlocks and lock timeouts are `E_SQL_CONFLICT` (retryable); a lost or refused connection is
`E_DB_UNAVAILABLE` (retryable); running out of time is `E_STEP_TIMEOUT`; no database at all is
`E_SQL_NO_DATABASE` and a database behind the wall `E_SQL_UNSAFE_DATABASE` (both permanent).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..compiler.models.params import SqlExecuteParams
from ..errors import E_SQL, E_SQL_CONFLICT, E_SQL_FORBIDDEN, E_STEP_TIMEOUT, A44Error
from . import sql_session
from .protocol import StepContext
from .sql_database import AppDatabase, Pools
from .sql_values import adapt_params, to_json

# SQLSTATEs that mean "the same statement may well succeed if tried again"
CONFLICT_STATES = {"40001": "serialization failure", "40P01": "deadlock", "55P03": "lock not available"}
# what a cached statement answers once DDL changed what it reads: the result type changed (0A000, "cached plan
# must not change result type"), or the parameter types fixed at Parse no longer fit (`text = integer`: 42883;
# a value of the old type for a column of the new one: 42804). Every other SQLSTATE is the statement's own.
STALE_PLAN_STATES = frozenset({"0A000", "42883", "42804"})


def row_count(status: str | None) -> int:
    """The affected/returned row count from a command status: `INSERT 0 1`, `UPDATE 3`, `SELECT 2`, `CREATE
    TABLE` (no count: 0)."""
    last = (status or "").rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


def _param_type(t) -> tuple[str, str | None]:
    """(type name, element type name of an array or None) of a placeholder; asyncpg names arrays `int4[]`."""
    if t.kind == "array":
        elem = t.name[:-2] if t.name.endswith("[]") else t.name.lstrip("_")
        return t.name, elem
    return t.name, None


async def _prepare_cached(conn, query: str):
    """A prepared statement backed by asyncpg's statement cache (what `conn.fetch(query)` uses internally).
    `Connection.prepare` always creates a new named statement: one more round trip and implicit transaction per
    step, and a server-side statement left until garbage collection closes it. asyncpg has no public way to get
    a cached statement with its parameter types (which the value adaptation needs), so this uses `_prepare(...,
    use_cache=True)` when the driver has it and falls back to `prepare`."""
    target = getattr(conn, "_con", None) or conn      # a pool's PoolConnectionProxy wraps the connection
    cached = getattr(target, "_prepare", None)
    if cached is not None:
        try:
            return await cached(query, use_cache=True)
        except TypeError:       # a driver whose private signature changed
            pass
    return await conn.prepare(query)


LOST_HINT = ("the step is retried under its retry policy on a new connection; a statement cut off after it "
             "committed may have taken effect, so write it to be safe to run twice (`on conflict ... do nothing` "
             "keyed by run and step, docs/connectors.md)")


def _forget_statements(conn) -> None:
    """Drop the statement cache of this one connection (the step holds it alone, so no other statement is in
    flight on it), never the pool's: `reload_schema_state()` would mark closed the statements that other steps are
    running on the pool's other connections (`cannot close prepared statement; refs == 1 != 0`)."""
    target = getattr(conn, "_con", None) or conn      # a pool's PoolConnectionProxy wraps the connection
    drop = getattr(target, "_drop_local_statement_cache", None)
    if drop is not None:
        drop()


class SqlExecuteConnector:
    name = "sql/execute"
    params_model = SqlExecuteParams

    def __init__(self) -> None:
        self._pools = Pools()      # of the DSNs steps name; the application database keeps its own

    async def aclose(self) -> None:
        await self._pools.aclose()

    async def _pool(self, p: SqlExecuteParams, ctx: StepContext):
        ref = p.dsnSecretRef or (ctx.declared or {}).get("dsnSecretRef")
        app_db = ctx.services.get("app_db") or AppDatabase(None)
        if ref is None:
            return await app_db.pool(ctx.project_id)
        return await self._pools.dsn(await ctx.secret(ref), app_db.wall)

    async def invoke(self, params: Any, ctx: StepContext) -> dict[str, Any]:
        p = params if isinstance(params, SqlExecuteParams) else SqlExecuteParams.model_validate(params)
        remaining = ctx.deadline - time.monotonic()
        if remaining <= 0:
            raise A44Error(E_STEP_TIMEOUT, "no time left to run the statement")
        try:
            async with asyncio.timeout(remaining):
                pool = await self._pool(p, ctx)
                async with sql_session.acquire(pool) as conn:
                    records, status = await self._run(conn, p.query, list(p.params or []))
        except TimeoutError:
            raise A44Error(E_STEP_TIMEOUT, f"the statement did not finish within {remaining:.3f} s") from None
        except A44Error:
            raise
        except Exception as exc:  # noqa: BLE001 - every driver failure must leave as a code
            raise self._translate(exc) from None
        rows = [to_json(r) for r in records[:p.maxRows]]
        return {"rowCount": row_count(status), "rows": rows, "truncated": len(records) > p.maxRows}

    async def _run(self, conn, query: str, values: list[Any]) -> tuple[list[Any], str]:
        """The statement in a transaction of its own that also resets the session (sql_session.py: one commit),
        or, when it cannot run in a transaction block, on its own and then the reset.

        The statement comes from asyncpg's per-connection statement cache, the one `conn.fetch` uses: after the
        first use of a query text on a pooled connection there is no Parse/Describe round trip before the statement
        itself (docs/connectors.md has the measurement). A cached statement that DDL made stale (STALE_PLAN_STATES)
        is prepared afresh on this connection and run once more, in a new transaction; any other failure is the
        statement's own and leaves every cache as it was."""
        import asyncpg

        for retry in (True, False):
            await sql_session.begin(conn)
            try:
                records, status = await self._statement(conn, query, values)
            except asyncpg.PostgresError as exc:
                state = getattr(exc, "sqlstate", None)
                if state in STALE_PLAN_STATES or state == sql_session.NOT_IN_A_BLOCK:
                    await sql_session.abandon(conn)     # refused before it ran: nothing to reset
                else:
                    await sql_session.rollback_quietly(conn)
                if state == sql_session.NOT_IN_A_BLOCK:
                    records, status = await self._statement(conn, query, values)
                    await self._after(conn, status)
                    await sql_session.reset_alone(conn)
                    return records, status
                if not retry or state not in STALE_PLAN_STATES:
                    raise
                _forget_statements(conn)
                continue
            except Exception:
                await sql_session.rollback_quietly(conn)
                raise
            await self._after(conn, status)
            if conn.is_in_transaction():
                await sql_session.commit(conn)
            else:       # the statement ended the transaction itself (`COMMIT`, `ROLLBACK`)
                await sql_session.reset_alone(conn)
            return records, status
        raise AssertionError("unreachable")

    @staticmethod
    async def _after(conn, status: str) -> None:
        """A statement that dropped every prepared statement (`DISCARD ALL`, `DEALLOCATE ALL`) dropped asyncpg's
        cached ones too: forget them on this connection."""
        if status in ("DISCARD ALL", "DEALLOCATE ALL"):
            _forget_statements(conn)

    async def _statement(self, conn, query: str, values: list[Any]) -> tuple[list[Any], str]:
        """Prepare (from the connection's statement cache), adapt the values to the placeholder types, run."""
        stmt = await _prepare_cached(conn, query)
        types = [_param_type(t) for t in stmt.get_parameters()]
        if len(values) != len(types):
            raise A44Error(E_SQL, f"the statement has {len(types)} placeholder(s) but params has "
                           f"{len(values)} value(s)")
        records = await stmt.fetch(*adapt_params(values, types))
        return records, stmt.get_statusmsg()

    @staticmethod
    def _translate(exc: BaseException) -> A44Error:
        import asyncpg  # both import asyncpg: loaded with the driver, on first use

        from ..db_errors import translate

        state = getattr(exc, "sqlstate", None)
        if state in CONFLICT_STATES:
            return A44Error(E_SQL_CONFLICT, f"{CONFLICT_STATES[state]}: {exc} (SQLSTATE {state})",
                            details={"sqlstate": state})
        err = translate(exc, operation="sql/execute")
        if err is not None and err.retryable:
            # E_DB_UNAVAILABLE: refused or lost connection (terminated backend, server restart, failover)
            return A44Error(err.code, err.message, hint=LOST_HINT)
        if isinstance(exc, (asyncpg.PostgresError, asyncpg.InterfaceError)):
            detail = {"sqlstate": state} if state else {}
            if getattr(exc, "constraint_name", None):
                detail["constraint"] = exc.constraint_name
            code = E_SQL_FORBIDDEN if state == "42501" else E_SQL
            return A44Error(code, f"{exc}" + (f" (SQLSTATE {state})" if state else ""), details=detail)
        if err is not None:
            return err
        return A44Error(E_SQL, f"{type(exc).__name__}: {exc}")
