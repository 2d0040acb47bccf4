"""Shared pytest setup. Only the PostgreSQL fixtures live here (tests/runtime/pg.py), so that any test
directory can ask for `pg_url` or `store`."""

import sys
from pathlib import Path

# `tests.runtime.pg` must import the same way whatever the entry point (pytest, python -m pytest) or cwd.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

pytest_plugins = ["tests.runtime.pg", "tests.rest_answers"]
