"""The import-linter contracts in pyproject.toml hold: imports only go down the layers of docs/architecture.md,
the lint path never imports asyncpg or aiohttp, and the CLI never imports runtime/ (it calls app/). An upward
import anywhere in the package, or a `runtime` import in cli/, fails this test."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept():
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)  # import-linter resolves the package from sys.path and reads pyproject.toml from here
    try:
        with contextlib.redirect_stdout(out):
            rc = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    finally:
        os.chdir(cwd)
    assert rc == 0, out.getvalue()
    assert "3 kept, 0 broken" in out.getvalue(), out.getvalue()
