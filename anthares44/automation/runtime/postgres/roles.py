"""The embedded server's login roles and what they own: least privilege for the daemon, none for workflow SQL.

`provision(admin_url, control_password, app_password)` runs once per server start, as the superuser, idempotently:
  * `a44`, the control role: LOGIN and nothing else (no superuser, CREATEDB, CREATEROLE, replication, RLS bypass,
    server-program or server-file roles). It owns the database `a44` and everything in its `automation` schema
    (objects an older a44 made as the superuser are handed over), so migrations, partitions, LISTEN/NOTIFY and
    advisory locks work as it; the daemon and the CLI connect as `a44`.
  * `a44_app`, the application role: the same lack of powers; it owns the database `a44_app` (so workflows create
    their tables in its `public` schema), where `sql/execute` runs by default.
  * CONNECT and TEMPORARY on `a44` are taken from PUBLIC: `a44_app` cannot even connect to the control store.
The superuser (`postgres`) is used for this setup only. With an external `A44_DATABASE_URL` the operator provides
the roles and `A44_APP_DATABASE_URL` instead (docs/store.md).
"""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import quote, urlsplit, urlunsplit

from ...errors import E_DB_UNAVAILABLE, A44Error

CONTROL_ROLE = CONTROL_DATABASE = "a44"
APP_ROLE = APP_DATABASE = "a44_app"


def login_url(port: int, role: str, password: str, database: str, host: str = "127.0.0.1") -> str:
    return f"postgresql://{role}:{quote(password, safe='')}@{host}:{port}/{database}"


async def _provision(admin_url: str, control_password: str, app_password: str) -> None:
    import asyncpg

    from ..store.core import Session

    raw = await asyncpg.connect(admin_url)
    conn = Session(raw)
    try:
        async with conn.transaction():
            await conn.execute("role_passwords_set", control_password=control_password, app_password=app_password)
            await conn.execute("roles_ensure")
        await conn.execute("control_database_owner")
        await conn.execute("control_schema_owner")
        await conn.execute("control_database_private")
        if not await conn.fetchval("app_database_exists"):
            try:
                await conn.execute("app_database_create")
            except asyncpg.DuplicateDatabaseError:
                pass        # made by a concurrent start
    finally:
        await raw.close()


def provision(admin_url: str, control_password: str, app_password: str) -> None:
    """Run the provisioning to its end, from synchronous code (a command) or from inside an event loop's thread
    (the daemon's start resolves its URLs synchronously): then on a thread of its own. `admin_url` is the
    superuser's URL of the control database."""
    failure: list[BaseException] = []

    def work():
        try:
            asyncio.run(_provision(admin_url, control_password, app_password))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        work()
    else:
        t = threading.Thread(target=work, name="a44-provision")
        t.start()
        t.join()
    if failure:
        exc = failure[0]
        if isinstance(exc, A44Error):
            raise exc
        parts = urlsplit(admin_url)
        where = urlunsplit(parts._replace(netloc=parts.hostname or ""))
        raise A44Error(E_DB_UNAVAILABLE, f"could not set up the roles {CONTROL_ROLE} and {APP_ROLE} at {where}: "
                                         f"{type(exc).__name__}: {exc}") from exc
