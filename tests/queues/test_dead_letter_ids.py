"""Migration 0008: dead letters the bus wrote as `dl_<ULID>` (before there was one insert path) become
`dlq_<ULID>`, together with the columns that point at them, and no other prefix can be written afterwards."""

from __future__ import annotations

import secrets

import asyncpg
import pytest

from anthares44.automation.clock import ManualClock
from anthares44.automation.runtime.store import migrate as migrations
from anthares44.automation.runtime.store.core import Session
from anthares44.automation.runtime.store.vocabulary import load_migrations
from tests.runtime.pg import _admin, with_database

OLD = "dl_01J9YB2C0000000000000000AB"
KEPT = "dlq_01J9YB2C0000000000000000CD"


@pytest.fixture
def db_url(pg_admin_url):
    name = f"a44_dlids_{secrets.token_hex(4)}"
    import asyncio

    asyncio.run(_admin(pg_admin_url, f"create database {name}"))
    yield with_database(pg_admin_url, name)
    asyncio.run(_admin(pg_admin_url, f"drop database {name} with (force)"))


def test_old_bus_ids_are_rewritten_to_the_one_prefix(db_url, aio, monkeypatch):
    now = ManualClock().now()
    before = [m for m in load_migrations() if m.number < 8]

    async def body():
        conn = await asyncpg.connect(db_url)
        try:
            with monkeypatch.context() as m:          # the database as a44 left it before migration 0008
                m.setattr(migrations, "load_migrations", lambda: before)
                await migrations.migrate(Session(conn), now)
            await conn.execute(
                "insert into automation.workflow_versions (project_id, workflow_id, version, sha256, ir, published_at)"
                " values ('pj', 'wf_x', 1, 'x', '{}', $1)", now)
            for dl_id, redrive_of in ((OLD, None), (KEPT, OLD)):
                await conn.execute(
                    "insert into automation.dead_letters (dead_letter_id, project_id, queue, envelope, error_code,"
                    " created_at, redrive_of) values ($1, 'pj', 'q_default', '{}', 'E_EVENT_TOO_OLD', $2, $3)",
                    dl_id, now, redrive_of)
            await conn.execute(
                "insert into automation.runs (run_id, project_id, workflow_id, version, state, idempotency_key,"
                " deadline_at, created_at, updated_at, dead_letter_id) values ('run_1', 'pj', 'wf_x', 1,"
                " 'succeeded', 'k', $1, $1, $1, $2)", now, OLD)
            with monkeypatch.context() as m:          # 0008 alone (later migrations are not its business)
                m.setattr(migrations, "load_migrations", lambda: [x for x in load_migrations() if x.number <= 8])
                report = await migrations.migrate(Session(conn), now)
            assert report.applied == ["0008_dead_letter_ids"]
            rows = await conn.fetch("select dead_letter_id, redrive_of from automation.dead_letters order by 1")
            new = "dlq_" + OLD[3:]
            assert [tuple(r) for r in rows] == sorted([(new, None), (KEPT, new)])
            assert await conn.fetchval("select dead_letter_id from automation.runs where run_id = 'run_1'") == new
            with pytest.raises(asyncpg.CheckViolationError):
                await conn.execute(
                    "insert into automation.dead_letters (dead_letter_id, project_id, envelope, error_code, created_at)"
                    " values ('dl_again', 'pj', '{}', 'E_X', $1)", now)
        finally:
            await conn.close()
    aio(body())
