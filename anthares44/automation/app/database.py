"""The database in use, as `a44 automation db` and the verbs that need a short store manage it: the embedded
PostgreSQL under $A44_HOME (start, stop, status, each project's workflow SQL database restored), the URLs of the
control store and of a project's application database, the schema's state and its migrations, and `open_store`,
the one way a short-lived verb connects (and closes) a store of its own.

    async with open_store(settings, migrate=True) as store:
        await Admin(store, project).tokens()
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from ..runtime.postgres.database import LocalDatabase, resolve_app_url, resolve_url
from ..runtime.store.core import Store
from ..settings import Settings


def control_url(settings: Settings, *, start: bool = True) -> str | None:
    """A44_DATABASE_URL, else the embedded server's URL (started first with `start`)."""
    return resolve_url(settings, start=start)


def app_url(settings: Settings, project: str, *, start: bool = True) -> str | None:
    """Where `project`'s workflow SQL runs; None when the control store is external and A44_APP_DATABASE_URL unset."""
    return resolve_app_url(settings, project, start=start)


def embedded(settings: Settings) -> LocalDatabase:
    """The embedded PostgreSQL under $A44_HOME: `start()`, `stop()`, `status()`, `restore_projects()`."""
    return LocalDatabase.of(settings)


@contextlib.asynccontextmanager
async def open_store(settings: Settings | None = None, url: str | None = None, *, migrate: bool = False, min_size: int = 1,
                     max_size: int = 2) -> AsyncIterator[Store]:
    """A store on `url` (default: the control store of `settings`, the embedded server started when it is the
    one), migrated first with `migrate`, closed on the way out."""
    settings = settings or Settings.from_env()
    url = url or await asyncio.to_thread(control_url, settings)
    assert url is not None   # started (start=True): the embedded server always answers with its URL
    store = await Store.connect(url, min_size=min_size, max_size=max_size, session_url=settings.database_session_url)
    try:
        if migrate:
            await store.migrate()
        yield store
    finally:
        await store.close()


async def schema_info(url: str) -> dict:
    """The server's version and the migrations applied and pending (`db status`)."""
    async with open_store(url=url, max_size=1) as store:
        return await store.schema_info()


async def migrate(url: str):
    """Apply the pending migrations, destructive ones included, and create partitions ahead (`db migrate`): the
    store's MigrationReport."""
    async with open_store(url=url, max_size=1) as store:
        return await store.migrate(destructive=True)
