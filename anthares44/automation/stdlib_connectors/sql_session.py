"""One workflow statement on a pooled connection, in one transaction that also resets the session (issue 32).

The session is the pool's, not the step's: whatever the statement did to it (`SET ROLE`, `SET search_path`,
`set_config`, temp tables and `pg_temp` functions, `LISTEN`, `PREPARE`, cursors `WITH HOLD`, session advisory locks,
sequence state) must be gone before the next step gets the connection. asyncpg's own reset on release
(`pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`) was a transaction of its own (the second commit of
every step) and missed `SET ROLE`, temp objects, sequence state and SQL-level prepared statements. Here the
statement runs between `BEGIN` and the reset followed by `COMMIT` (workflow_db.sql `workflow_session_*`), so a step
costs one commit and three round trips (`BEGIN`; the statement, from asyncpg's statement cache; reset + commit):

  * statement succeeded, still in the transaction: `workflow_session_reset_commit`. The transactional resets
    (`RESET ALL`, `UNLISTEN *`, `DISCARD TEMP`) take effect with the commit; the others (advisory locks, cursors,
    prepared statements) at once. A failing commit (a deferred constraint) is the statement's error; the
    transaction is then gone, and `workflow_session_rollback_reset` runs on its own.
  * statement failed: `workflow_session_rollback_reset` (one commit: the reset's; the statement's rolled back),
    since session advisory locks and `PREPARE` survive a rollback.
  * the statement cannot run in a transaction block (SQLSTATE 25001: `VACUUM`, `CREATE INDEX CONCURRENTLY`): it
    runs again on its own, then `workflow_session_reset` (two commits, as every step cost before).
  * the statement ended the transaction itself (`COMMIT`, `ROLLBACK`): `workflow_session_reset` on its own.
  * the step was cut off (its timeout, a cancelled task): the pool's reset on release (`pool_reset`): asyncpg waits
    for the server to cancel the statement, rolls back, then `workflow_session_reset`.
A connection whose reset fails is terminated by the pool, never handed out again.

The reset runs `SET SESSION AUTHORIZATION DEFAULT` and `RESET ALL` first, so the rest resolves names with the
pinned `search_path` (pg_catalog first: no function or view the statement made can stand in for them), and it
qualifies every catalog name as well.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from .workflow_db import QUERIES

# stdlib_connectors/workflow_db.sql
_RESET, _RESET_COMMIT, _ROLLBACK_RESET, _ROLLBACK = (QUERIES[n].sql for n in (
    "workflow_session_reset", "workflow_session_reset_commit", "workflow_session_rollback_reset",
    "workflow_session_rollback"))
NOT_IN_A_BLOCK = "25001"        # active_sql_transaction: "... cannot run inside a transaction block"

# connections a statement left clean (reset inside its committed transaction), by id: `pool_reset` skips them once
_clean: dict[int, Any] = {}


def raw(conn):
    """The asyncpg Connection behind a pool's PoolConnectionProxy."""
    return getattr(conn, "_con", None) or conn


async def pool_reset(conn) -> None:
    """The pools' `reset` (asyncpg has already rolled back an open transaction): nothing when this task's statement
    reset the session in its own transaction, else `workflow_session_reset`."""
    if _clean.pop(id(conn), None) is conn:
        return
    await conn.execute(_RESET)


@contextlib.asynccontextmanager
async def acquire(pool) -> AsyncIterator[Any]:
    """`pool.acquire()`, the clean mark of its connection gone once it is back (or closed) whatever happened."""
    held = None
    try:
        async with pool.acquire() as conn:
            held = raw(conn)
            yield conn
    finally:
        if held is not None:
            _clean.pop(id(held), None)


def _mark_clean(conn) -> None:
    con = raw(conn)
    _clean[id(con)] = con


async def begin(conn) -> None:
    """`BEGIN` as asyncpg's own transaction block, so that a step cut off in it is rolled back on release without
    asyncpg's 'Resetting connection with an active transaction' error log."""
    tx = conn.transaction()
    await tx.start()
    tx._managed = True          # what `async with` sets; the block ends in `commit` / `rollback` below


def _forget(conn) -> None:
    raw(conn)._top_xact = None  # the block ended by our own COMMIT / ROLLBACK, not by the Transaction object


async def commit(conn) -> None:
    """Reset and commit in one round trip; the connection is then clean (see `pool_reset`). A failing commit
    leaves the transaction rolled back and the session reset, and raises."""
    try:
        await conn.execute(_RESET_COMMIT)
    except Exception:       # a cancelled step is left to `pool_reset`: the server is cancelling its statement
        await rollback_quietly(conn)
        raise
    _forget(conn)
    if not conn.is_in_transaction():
        _mark_clean(conn)


async def rollback(conn) -> None:
    """End a failed (or still open) transaction and reset the session (its own implicit transaction)."""
    _forget(conn)
    await conn.execute(_ROLLBACK_RESET)


async def abandon(conn) -> None:
    """End a transaction whose statement did nothing (refused before it ran: stale plan, 25001)."""
    _forget(conn)
    await conn.execute(_ROLLBACK)


async def rollback_quietly(conn) -> None:
    """`rollback` after a failure of the statement's own: a connection that cannot do it is closed by the pool."""
    try:
        await rollback(conn)
    except Exception:  # noqa: BLE001 - lost or broken: the caller raises the statement's error, the pool closes it
        pass


async def reset_alone(conn) -> None:
    """The statement ran outside our block (it cannot run in one, or it ended ours): reset on its own."""
    _forget(conn)
    if conn.is_in_transaction():        # the statement opened a block of its own (`BEGIN` after its `COMMIT`)
        await conn.execute(_ROLLBACK)
    await conn.execute(_RESET)
    _mark_clean(conn)
