"""Where a44 keeps its files on this machine: `$A44_HOME` (default `~/.a44`), holding the embedded PostgreSQL
(`pg/`), the encrypted secrets file, the object store of `storage/*`, the network routes of `vpn/http` and the CLI's
credentials. Read at each call, so a test or an embedder that sets `A44_HOME` is seen at once."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "A44_HOME"


def a44_home() -> Path:
    return Path(os.environ.get(HOME_ENV) or "~/.a44").expanduser()
