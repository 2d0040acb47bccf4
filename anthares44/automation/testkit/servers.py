"""Other PostgreSQL deployments for the tests than the embedded wheel (`A44_TEST_POSTGRES`, docs/testkit.md):
Debian's server package and a PgBouncer in transaction pooling mode in front of it.

`debian_bin()` finds the oldest major of Debian's `postgresql-NN` packages installed (/usr/lib/postgresql/NN/bin);
`Bouncer` runs one `pgbouncer` (Debian's package) on 127.0.0.1 and a free port, `pool_mode = transaction`, every
database of the server behind it reachable (`* =`), logins trusted: what managed PostgreSQL behind a pooler looks
like to a44. Both raise `Unavailable` with what to install when the binaries are missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

DEBIAN_ROOT = Path("/usr/lib/postgresql")
KINDS = ("embedded", "debian", "pgbouncer")


class Unavailable(RuntimeError):
    """The binaries a deployment needs are not installed (the message says which package)."""


def debian_bin(root: Path = DEBIAN_ROOT) -> Path:
    """The bin directory of the oldest PostgreSQL major Debian's packages installed here."""
    majors = sorted(int(p.name) for p in root.glob("*") if p.name.isdigit() and (p / "bin" / "postgres").exists()) \
        if root.is_dir() else []
    if not majors:
        raise Unavailable(f"no Debian PostgreSQL server under {root}: apt-get install postgresql-15")
    return root / str(majors[0]) / "bin"


def pgbouncer_binary() -> str:
    found = shutil.which("pgbouncer") or next((p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
                                               if os.path.exists(p)), None)
    if found is None:
        raise Unavailable("no pgbouncer binary: apt-get install pgbouncer")
    return found


def pgbouncer_version() -> str:
    out = subprocess.run([pgbouncer_binary(), "--version"], capture_output=True, text=True, timeout=10).stdout
    return out.splitlines()[0].strip() if out else "unknown"


class Bouncer:
    """One pgbouncer in `root` in front of 127.0.0.1:`upstream_port`; `user`: the OS user it runs as when we are
    root (it refuses to run as root)."""

    def __init__(self, root: Path, upstream_port: int, *, user: str | None = None, pool_mode: str = "transaction"):
        self.root = Path(root)
        self.upstream_port = upstream_port
        self.user = user
        self.pool_mode = pool_mode
        self.port: int | None = None
        self._proc: subprocess.Popen | None = None

    def url(self, database: str = "postgres", role: str = "postgres") -> str:
        return f"postgresql://{role}@127.0.0.1:{self.port}/{database}"

    def _write_config(self, port: int) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        users = self.root / "pgbouncer-users.txt"
        users.write_text('"postgres" ""\n')
        ini = self.root / "pgbouncer.ini"
        ini.write_text("\n".join([
            "[databases]",
            f"* = host=127.0.0.1 port={self.upstream_port}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {users}",
            f"pool_mode = {self.pool_mode}",
            "max_client_conn = 2000",
            "default_pool_size = 20",
            "server_lifetime = 60",
            "server_idle_timeout = 10",
            f"logfile = {self.root / 'pgbouncer.log'}",
            f"pidfile = {self.root / 'pgbouncer.pid'}",
            "",
        ]))
        if self.user is not None and os.geteuid() == 0:
            shutil.chown(self.root, self.user)
            for p in (users, ini):
                shutil.chown(p, self.user)
            for parent in self.root.parents:    # the user must reach its directory
                mode = parent.stat().st_mode
                if not mode & 0o001:
                    parent.chmod(mode | 0o001)
        return ini

    def start(self, *, wait_s: float = 15) -> Bouncer:
        from ..runtime.postgres.embedded import free_port, port_accepts

        binary = pgbouncer_binary()
        for _ in range(5):      # another process may take the free port between the probe and the bind
            port = free_port()
            ini = self._write_config(port)
            args = [binary, *(["-u", self.user] if self.user and os.geteuid() == 0 else []), str(ini)]
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and self._proc.poll() is None:
                if port_accepts(port):
                    self.port = port
                    return self
                time.sleep(0.05)    # wall: waiting for a process to bind its port
            self.stop()
        log = self.root / "pgbouncer.log"
        raise Unavailable(f"pgbouncer did not start: {log.read_text()[-800:] if log.exists() else ''}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        self._proc = None
