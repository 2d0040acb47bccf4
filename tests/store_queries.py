"""The named queries of tests/store_queries.sql, run on a Store's pool: reads that only the tests make (the package
does not ship them), bound by name like the store's own (`await fetch(store, "logs_archive_days")`)."""

from __future__ import annotations

from pathlib import Path

from anthares44.automation.named_sql import load_file

QUERIES = load_file(Path(__file__).with_suffix(".sql"))


async def fetch(store, name: str, /, **params) -> list:
    q = QUERIES[name]
    if set(params) != set(q.params):
        raise TypeError(f"test query {name} takes {', '.join(q.params) or 'no parameters'}, not {sorted(params)}")
    async with store.connection(name) as conn:
        return await conn.fetch(q.sql, *[params[p] for p in q.params])


async def fetchrow(store, name: str, /, **params):
    rows = await fetch(store, name, **params)
    return rows[0] if rows else None
