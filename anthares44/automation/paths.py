"""Where a44 keeps its files on this machine: the a44 home (`Settings.home`, i.e. `A44_HOME`, default `~/.a44`),
holding the embedded PostgreSQL (`pg/`), the encrypted secrets file, the object store of `storage/*`, the
network routes of `vpn/http` and the CLI's credentials. The edge that read the settings passes the value in."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOME = "~/.a44"


def a44_home(home: str | os.PathLike[str] | None) -> Path:
    """The a44 directory named by `home` (`Settings.home`); None or empty: `~/.a44`."""
    return Path(home or DEFAULT_HOME).expanduser()


def storage_root(home: str | os.PathLike[str] | None) -> Path:
    """The local object store of `storage/*` and of results too large for a row: `<home>/storage`."""
    return a44_home(home) / "storage"


def log_archive_root(home: str | os.PathLike[str] | None, directory: str | os.PathLike[str] | None = None) -> Path:
    """Where the log archive's Parquet days live: `directory` (`A44_LOG_ARCHIVE_DIR`), else `<home>/storage/logs`
    in the local object store."""
    return Path(directory).expanduser() if directory else storage_root(home) / "logs"
