"""Loader of the control store's named SQL queries in `runtime/store/queries/*.sql` (format: named_sql.py) and of the
migration files: it only reads them; the store (store.py) is the only code that runs them. One file per concern;
names are unique across all files, and a fragment may be included from any of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ...named_sql import Query, QueryError, load_files

QUERY_DIR = Path(__file__).parent / "queries"


@cache
def load_queries(directory: Path = QUERY_DIR) -> dict[str, Query]:
    """All named queries, keyed by name; loaded once per process."""
    return load_files(sorted(directory.glob("*.sql")))


MIGRATION_DIR = Path(__file__).parent / "migrations"
_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    sql: str


@cache
def load_migrations(directory: Path = MIGRATION_DIR) -> tuple[Migration, ...]:
    found = []
    for path in sorted(directory.glob("*.sql")):
        m = _MIGRATION_FILE.match(path.name)
        if m is None:
            raise QueryError(f"migration file {path.name} is not named NNNN_name.sql")
        found.append(Migration(int(m.group(1)), path.stem, path.read_text(encoding="utf-8")))
    numbers = [m.number for m in found]
    # numbers are handed out ahead to parallel branches (one may land before a lower one): unique and increasing
    # is what applying needs (migrate.py applies each number not yet recorded, in order)
    if numbers != sorted(set(numbers)) or (numbers and numbers[0] != 1):
        raise QueryError(f"migrations must be numbered 0001, 0002, ... each once; found {numbers}")
    return tuple(found)
