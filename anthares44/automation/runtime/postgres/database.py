"""Where the databases are. The control store: `A44_DATABASE_URL`, or the embedded server under `$A44_HOME/pg`
(started on demand), database `a44` reached as the non-superuser role `a44`. The application databases, where
workflow SQL runs, one per project: `A44_APP_DATABASE_URL` with `{project}` (the operator made them), or, on the
embedded server only, the database and role `a44_app_<project>` that a44 makes (projects.py); with an external
control store and no `A44_APP_DATABASE_URL` there is none (sql/execute without a connection fails with
E_SQL_NO_DATABASE).

The embedded server outlives the command that started it and is reused by the next one. Its coordinates are in
`$A44_HOME/pg/state.json` (mode 0600: port, pid, the passwords of `postgres` and `a44`, and `app_secret`, from
which the project roles' passwords are derived) and are only trusted after a liveness check, so the files left
behind by a `kill -9` are harmless. `$A44_HOME/pg` is mode 0700 and the server's log 0600 (embedded.py): the log
holds the text of failed statements, workflow SQL included. `$A44_HOME/pg/lock` (flock) serialises start/stop, so
two commands starting together do not both run initdb or pick two ports.

The variables are read by the edges (settings.py): the functions here take the `Settings` they read.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ...errors import E_DB_UNAVAILABLE, A44Error
from ...paths import a44_home
from ...settings import Settings
from .embedded import SUPERUSER, EmbeddedServer, bin_dir, free_port, port_accepts
from .projects import EmbeddedProjects
from .roles import CONTROL_ROLE, login_url, provision

DATABASE_NAME = "a44"


@dataclass(frozen=True)
class EmbeddedStatus:
    running: bool
    port: int | None
    pid: int | None
    data_dir: Path
    url: str | None


class LocalDatabase:
    """The embedded PostgreSQL of one `$A44_HOME`; `system_user`: A44_PG_SYSTEM_USER (embedded.py)."""

    def __init__(self, home: Path | str | None = None, *, system_user: str | None = None):
        self.home = a44_home(home).resolve()
        self.dir = self.home / "pg"
        self.server = EmbeddedServer(self.dir, durable=True, system_user=system_user)
        self._state_file = self.dir / "state.json"

    @classmethod
    def of(cls, settings: Settings) -> LocalDatabase:
        return cls(settings.home, system_user=settings.pg_system_user)

    @contextmanager
    def _locked(self):
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.dir / "lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _state(self) -> dict:
        try:
            return json.loads(self._state_file.read_text())
        except (OSError, ValueError):
            return {}

    def _write_state(self, state: dict) -> None:
        tmp = self._state_file.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        # it holds the passwords: 0600 from its creation, not after a window at the umask's mode
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as fh:
            fh.write(json.dumps(state, indent=2))
        tmp.replace(self._state_file)

    def _admin_url(self, port: int, state: dict) -> str:
        """The superuser's URL: setup only (createdb, roles.provision)."""
        return login_url(port, SUPERUSER, state["password"], DATABASE_NAME)

    @staticmethod
    def _url(port: int, state: dict) -> str | None:
        """The control store's URL, None while the role is not made yet."""
        if not state.get("control_password"):
            return None
        return login_url(port, CONTROL_ROLE, state["control_password"], DATABASE_NAME)

    def status(self) -> EmbeddedStatus:
        st = self.server.status()
        state = self._state()
        running = st is not None and port_accepts(st.port)
        return EmbeddedStatus(running=running, port=st.port if st else None, pid=st.pid if st else None,
                              data_dir=self.server.data, url=self._url(st.port, state) if running else None)

    def start(self) -> str:
        """Start the server unless it runs already; create the cluster and the `a44` database the first time.
        Returns the URL."""
        with self._locked():
            state = self._state()
            st = self.server.status()
            if st is None or not port_accepts(st.port):
                if st is not None:
                    self.server.stop()  # alive but not answering: restart it cleanly
                password = state.get("password")
                if not self.server.initialized() or not password:
                    password = secrets.token_urlsafe(24)
                    if self.server.data.exists():
                        # a cluster whose password we lost cannot be used; keep it aside, never delete data
                        self.server.data.rename(self.dir / f"data.orphaned.{secrets.token_hex(4)}")
                    self.server.initdb(password)
                # keep the previous port when it is free, so a URL a user saved keeps working
                port = state.get("port")
                if not port or port_accepts(port):
                    port = free_port()
                st = self.server.start(port)
                state = {**state, "port": st.port, "pid": st.pid, "password": password,
                         "data_dir": str(self.server.data)}
                self._write_state(state)
                self._ensure_database(st.port)
                self._ensure_roles(st.port, state)
            elif not (state.get("control_password") and state.get("app_secret")):
                self._ensure_roles(st.port, state)      # a server started by an a44 that made no such roles
            return self._url(st.port, state)

    def projects(self) -> EmbeddedProjects:
        """Where each project's workflow SQL runs on this server (projects.py; the server started if needed)."""
        self.start()
        state = self._state()
        return EmbeddedProjects(self._admin_url(self.server.status().port, state), state["app_secret"],
                                host="127.0.0.1", port=self.server.status().port)

    def restore_projects(self) -> tuple[list[str], list]:
        """Make or restore the workflow SQL role and database of every project that has published a workflow
        (projects.py), as `db start` and every daemon start do: (projects, [(project, A44Error)] of those that
        failed); none before the control store is migrated (nothing is published yet)."""
        import asyncio

        from ...errors import E_DB_SCHEMA
        from ..store.core import Store

        url = self.start()

        async def run():
            store = await Store.connect(url, min_size=1, max_size=1)
            try:
                projects = [r["project_id"] for r in await store.fetch("projects_published")]
            except A44Error as exc:
                if exc.code != E_DB_SCHEMA:
                    raise
                return [], []
            finally:
                await store.close()
            return projects, await self.projects().restore(projects)

        return asyncio.run(run())

    def _ensure_roles(self, port: int, state: dict) -> None:
        """The role `a44` and what it owns (roles.py); its password and the secret of the project roles' passwords
        are made once, kept in state.json."""
        control = state.get("control_password") or secrets.token_urlsafe(24)
        app_secret = state.get("app_secret") or secrets.token_urlsafe(32)
        provision(self._admin_url(port, state), control)
        if (state.get("control_password"), state.get("app_secret")) != (control, app_secret):
            state.update(control_password=control, app_secret=app_secret)
            self._write_state(state)

    def _ensure_database(self, port: int) -> None:
        """Create the `a44` database the first time (the wheel's `createdb`; "already exists" is fine)."""
        state = self._state()
        env = {**os.environ, "PGPASSWORD": state["password"]}
        proc = subprocess.run([str(bin_dir() / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", SUPERUSER,
                               DATABASE_NAME], capture_output=True, text=True, env=env, timeout=30)
        if proc.returncode != 0 and "already exists" not in proc.stderr:
            raise A44Error(E_DB_UNAVAILABLE, f"could not create database {DATABASE_NAME}: {proc.stderr.strip()}")

    def stop(self) -> bool:
        with self._locked():
            return self.server.stop()


def resolve_url(settings: Settings, *, start: bool = True) -> str | None:
    """The URL of the database in use: A44_DATABASE_URL, else the embedded one (started when `start`)."""
    if settings.database_url:
        return settings.database_url
    local = LocalDatabase.of(settings)
    if start:
        return local.start()
    return local.status().url


def resolve_projects(settings: Settings, *, start: bool = True):
    """Where each project's workflow SQL runs (a sql_database.ProjectLocator): A44_APP_DATABASE_URL (a `{project}`
    template; E_SQL_UNSAFE_DATABASE without the placeholder), else the embedded server's databases per project when
    the control store is the embedded one (started when `start`; None when it is not running), else None (an
    external control store is never reused for workflow SQL)."""
    from ...stdlib_connectors.sql_database import TemplateLocator

    if settings.app_database_url:
        return TemplateLocator(settings.app_database_url)
    if settings.database_url:
        return None
    local = LocalDatabase.of(settings)
    if not start and not local.status().running:
        return None
    return local.projects()


def resolve_app_url(settings: Settings, project: str, *, start: bool = True) -> str | None:
    """The URL of `project`'s application database (made first on the embedded server), or None (see
    resolve_projects)."""
    import asyncio

    locator = resolve_projects(settings, start=start)
    if locator is None:
        return None
    return asyncio.run(locator.url(project))
