"""The embedded server's application database: where workflow SQL runs by default (§14), apart from the control
store.

`provision(admin_url, password)` makes, idempotently and as the server's superuser: the login role `a44_app`
(NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS, no membership in the server-program or
server-file roles, the given password), the database `a44_app` it owns (so workflows create their tables in its
`public` schema), and it takes CONNECT on the control database `a44` away from PUBLIC. `db start` / `db migrate`
(via `LocalDatabase.start`) call it; with an external `A44_DATABASE_URL` the operator provides
`A44_APP_DATABASE_URL` instead (docs/store.md).
"""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import quote

from ..errors import E_DB_UNAVAILABLE, A44Error

APP_ROLE = APP_DATABASE = "a44_app"


def app_url(port: int, password: str, host: str = "127.0.0.1") -> str:
    return f"postgresql://{APP_ROLE}:{quote(password, safe='')}@{host}:{port}/{APP_DATABASE}"


async def _provision(admin_url: str, password: str) -> None:
    import asyncpg

    from .queries import sql

    conn = await asyncpg.connect(admin_url)
    try:
        async with conn.transaction():
            await conn.execute(sql("app_password_set"), password)
            await conn.execute(sql("app_role_ensure"))
        if not await conn.fetchval(sql("app_database_exists")):
            try:
                await conn.execute(sql("app_database_create"))
            except asyncpg.DuplicateDatabaseError:
                pass        # made by a concurrent start
        await conn.execute(sql("control_database_private"))
    finally:
        await conn.close()


def provision(admin_url: str, password: str) -> None:
    """Run the provisioning to its end, from synchronous code (a command) or from inside an event loop's thread
    (the daemon's start resolves its URLs synchronously): then on a thread of its own."""
    failure: list[BaseException] = []

    def work():
        try:
            asyncio.run(_provision(admin_url, password))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        work()
    else:
        t = threading.Thread(target=work, name="a44-app-provision")
        t.start()
        t.join()
    if failure:
        exc = failure[0]
        if isinstance(exc, A44Error):
            raise exc
        raise A44Error(E_DB_UNAVAILABLE, f"could not create the application database {APP_DATABASE}: "
                                         f"{type(exc).__name__}: {exc}") from exc
