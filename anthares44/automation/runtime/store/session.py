"""A connection borrowed from the store, running named queries only (queries/*.sql by name, named arguments bound
in the order the loader recorded): the one place besides core.py that hands asyncpg SQL text
(tests/test_sql_callers.py). Its own module so that the store's helpers (pooler.py) run named queries without
importing the store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg
from asyncpg.transaction import Transaction

from ...named_sql import Query
from .vocabulary import Migration, load_queries

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

# what the store runs SQL on: a connection of its pool (a proxy while borrowed), or one opened on its own
Connection: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"


def _query(name: str) -> Query:
    try:
        return load_queries()[name]
    except KeyError:
        raise TypeError(f"no named query {name!r} in runtime/store/queries/*.sql") from None


def _bind(q: Query, params: dict[str, Any]) -> tuple[Any, ...]:
    """The positional arguments of `q` ($1..$n, in the order recorded at load) from its named ones."""
    try:
        args = tuple([params[p] for p in q.params])
    except KeyError:
        args = None
    if args is None or len(params) != len(q.params):
        missing = sorted(set(q.params) - set(params))
        unknown = sorted(set(params) - set(q.params))
        raise TypeError(f"query {q.name} ({q.source}) takes {', '.join(q.params) or 'no parameters'}"
                        + (f"; missing {', '.join(missing)}" if missing else "")
                        + (f"; unknown {', '.join(unknown)}" if unknown else ""))
    return args


class Session:
    """A connection borrowed from the store (a transaction's, or one statement's), running named queries only."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Connection):
        self._conn = conn

    # the same SQL text object every time, so asyncpg's per-connection statement cache prepares each query once
    async def fetch(self, name: str, /, **params: Any) -> list[asyncpg.Record]:
        q = _query(name)
        return await self._conn.fetch(q.sql, *_bind(q, params))

    async def fetchrow(self, name: str, /, **params: Any) -> asyncpg.Record | None:
        q = _query(name)
        return await self._conn.fetchrow(q.sql, *_bind(q, params))

    async def fetchval(self, name: str, /, **params: Any) -> Any:
        q = _query(name)
        return await self._conn.fetchval(q.sql, *_bind(q, params))

    async def execute(self, name: str, /, **params: Any) -> str:
        q = _query(name)
        return await self._conn.execute(q.sql, *_bind(q, params))

    async def executemany(self, name: str, rows: list[dict[str, Any]]) -> None:
        """One pipelined round trip for several executions of the query (results are discarded)."""
        q = _query(name)
        await self._conn.executemany(q.sql, [_bind(q, r) for r in rows])

    async def fetchmany(self, name: str, rows: list[dict[str, Any]]) -> list[asyncpg.Record]:
        """Like `executemany`, returning the first row of each execution, in order."""
        q = _query(name)
        return await self._conn.fetchmany(q.sql, [_bind(q, r) for r in rows])

    def transaction(self) -> Transaction:
        return self._conn.transaction()

    async def apply(self, migration: Migration) -> None:
        """Run a migration file (its statements, no parameters)."""
        await self._conn.execute(migration.sql)
