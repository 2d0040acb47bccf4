"""The embedded server's control role, and what is private to it: least privilege for the daemon, none for workflow
SQL.

`provision(admin_url, control_password)` runs once per server start, as the superuser, idempotently:
  * `a44`, the control role: LOGIN and nothing else (no superuser, CREATEDB, CREATEROLE, replication, RLS bypass,
    server-program or server-file roles). It owns the database `a44` and everything in its `automation` schema
    (objects an older a44 made as the superuser are handed over), so migrations, partitions, LISTEN/NOTIFY and
    advisory locks work as it; the daemon and the CLI connect as `a44`.
  * CONNECT and TEMPORARY on `a44`, `postgres` and `template1` are taken from PUBLIC: no workflow role can even
    connect to the control store or to the maintenance databases.
Workflow SQL runs as a role of its project on a database of its project (projects.py). An a44 before issue 24 made
one role `a44_app` owning a database `a44_app` for every project: both are left as they are, unused (docs/store.md
says how to move their tables). The superuser (`postgres`) is used for setup only. With an external
`A44_DATABASE_URL` the operator provides the roles and `A44_APP_DATABASE_URL` instead (docs/store.md).
"""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import quote, urlsplit, urlunsplit

from ...errors import E_DB_UNAVAILABLE, A44Error

CONTROL_ROLE = CONTROL_DATABASE = "a44"


def login_url(port: int, role: str, password: str, database: str, host: str = "127.0.0.1") -> str:
    return f"postgresql://{role}:{quote(password, safe='')}@{host}:{port}/{database}"


def with_database(url: str, database: str) -> str:
    """`url` naming another database on the same server, as the same role."""
    return urlunsplit(urlsplit(url)._replace(path="/" + quote(database, safe="")))


async def _provision(admin_url: str, control_password: str) -> None:
    import asyncpg

    from ..store.session import Session

    raw = await asyncpg.connect(admin_url)
    conn = Session(raw)
    try:
        async with conn.transaction():
            await conn.execute("role_passwords_set", control_password=control_password)
            await conn.execute("roles_ensure")
        await conn.execute("control_database_owner")
        await conn.execute("control_schema_owner")
        await conn.execute("control_database_private")
        await conn.execute("maintenance_databases_private")
    finally:
        await raw.close()


def provision(admin_url: str, control_password: str) -> None:
    """Run the provisioning to its end, from synchronous code (a command) or from inside an event loop's thread
    (the daemon's start resolves its URLs synchronously): then on a thread of its own. `admin_url` is the
    superuser's URL of the control database."""
    failure: list[BaseException] = []

    def work():
        try:
            asyncio.run(_provision(admin_url, control_password))
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
        raise A44Error(E_DB_UNAVAILABLE, f"could not set up the role {CONTROL_ROLE} at {where}: "
                                         f"{type(exc).__name__}: {exc}") from exc
