"""The format of named SQL files: a query runs from its `-- name:` line to the next one and needs a one-line
`-- purpose:`.

    -- name: create_run
    -- purpose: insert a run, claim its idempotency key and log its creation, in one statement
    insert into ...;

The control store's queries are `runtime/queries/*.sql` (runtime/queries.py: the store runs them); the one query
a connector runs on a workflow's own database sits beside it (stdlib_connectors/workflow_db.sql).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_PURPOSE = re.compile(r"^--\s*purpose:\s*(\S.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    name: str
    purpose: str
    sql: str
    source: str


class QueryError(Exception):
    """A malformed query file: a bug in this package, reported at load time rather than at first use."""


def parse(text: str, source: str) -> list[Query]:
    marks = list(_NAME.finditer(text))
    out = []
    for i, m in enumerate(marks):
        body = text[m.end(): marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        purpose = _PURPOSE.search(body)
        if purpose is None:
            raise QueryError(f"{source}: query {m.group(1)} has no '-- purpose:' line")
        sql = _PURPOSE.sub("", body, count=1).strip()
        if not sql:
            raise QueryError(f"{source}: query {m.group(1)} is empty")
        out.append(Query(m.group(1), purpose.group(1).strip(), sql, source))
    return out


def load_file(path: Path) -> dict[str, Query]:
    """The named queries of one file, keyed by name."""
    queries: dict[str, Query] = {}
    for q in parse(path.read_text(encoding="utf-8"), path.name):
        if q.name in queries:
            raise QueryError(f"query {q.name} is defined twice in {path.name}")
        queries[q.name] = q
    return queries
