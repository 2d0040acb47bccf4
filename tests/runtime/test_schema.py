"""The migrations produce exactly the committed schema.sql; migrating is safe to repeat and to run concurrently;
every named query is well-formed and prepares against the real schema."""

import asyncio
import secrets

import asyncpg
import pytest

from anthares44.automation.clock import ManualClock
from anthares44.automation.named_sql import QueryError, parse
from anthares44.automation.runtime.store import migrate as migrations
from anthares44.automation.runtime.store import schema_dump
from anthares44.automation.runtime.store.core import Session
from anthares44.automation.runtime.store.vocabulary import load_migrations, load_queries
from tests.runtime.pg import with_database


def test_migrations_produce_the_committed_schema(pg_url, aio):
    async def major():
        conn = await asyncpg.connect(pg_url)
        try:
            return int(await conn.fetchval("show server_version_num")) // 10000
        finally:
            await conn.close()

    if aio(major()) != 18:
        pytest.skip("schema.sql is generated with PostgreSQL 18; pg_dump output of other servers differs cosmetically")
    assert schema_dump.dump_schema(pg_url) == schema_dump.SCHEMA_FILE.read_text(), \
        "regenerate with: .venv/bin/python -m anthares44.automation.runtime.store.schema_dump"


@pytest.fixture
def empty_db_url(pg_admin_url):
    name = f"a44_empty_{secrets.token_hex(4)}"

    async def admin(stmt):
        conn = await asyncpg.connect(pg_admin_url)
        try:
            await conn.execute(stmt)
        finally:
            await conn.close()

    asyncio.run(admin(f"create database {name}"))
    yield with_database(pg_admin_url, name)
    asyncio.run(admin(f"drop database {name} with (force)"))


def test_concurrent_migrators_apply_each_migration_once(empty_db_url, aio):
    now = ManualClock().now()

    async def one():
        conn = await asyncpg.connect(empty_db_url)
        try:
            return await migrations.migrate(Session(conn), now)
        finally:
            await conn.close()

    async def body():
        reports = await asyncio.gather(*(one() for _ in range(4)))
        conn = await asyncpg.connect(empty_db_url)
        try:
            rows = await conn.fetch("select number from automation.schema_migrations order by number")
        finally:
            await conn.close()
        return reports, [r["number"] for r in rows]

    reports, numbers = aio(body())
    names = [m.name for m in load_migrations()]
    assert numbers == [m.number for m in load_migrations()]
    assert sum(len(r.applied) for r in reports) == len(names)  # each file applied by exactly one process
    assert sum(r.partitions_created for r in reports) == migrations.PARTITION_MONTHS_AHEAD + 1


def test_migrate_again_is_a_no_op(store, aio):
    report = aio(store.migrate())
    assert report.applied == [] and report.changed == []
    assert report.already == [m.name for m in load_migrations()]


def test_every_named_query_has_a_purpose_and_prepares(store, aio):
    queries = load_queries()
    assert len(queries) >= 20

    async def body():
        async with store.connection("prepare all") as conn:
            for q in queries.values():
                if q.name == "migration_bootstrap":  # several statements: cannot be prepared as one
                    continue
                await conn.prepare(q.sql)

    aio(body())
    assert all(q.purpose for q in queries.values())


def test_query_files_reject_a_query_without_purpose():
    with pytest.raises(QueryError, match="purpose"):
        parse("-- name: x\nselect 1;\n", "bad.sql")
