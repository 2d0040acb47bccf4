"""The format of named SQL files: a query runs from its `-- name:` line to the next one and needs a one-line
`-- purpose:`.

    -- name: create_run
    -- purpose: insert a run, claim its idempotency key and log its creation, in one statement
    insert into ...;

A `-- fragment: NAME` block (with its own purpose) is SQL text that several queries share, so that one write is
written once: a line `-- include: NAME` in a query stands for the fragment's text. A fragment is not a query (it
cannot run alone); one that no query includes, or an include of an unknown fragment, is a load error.

The control store's queries are `runtime/queries/*.sql` (runtime/queries.py: the store runs them); the one query
a connector runs on a workflow's own database sits beside it (stdlib_connectors/workflow_db.sql).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

_NAME = re.compile(r"^--\s*(name|fragment):\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^[ \t]*--\s*include:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_PURPOSE = re.compile(r"^--\s*purpose:\s*(\S.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    name: str
    purpose: str
    sql: str
    source: str
    fragment: bool = False


class QueryError(Exception):
    """A malformed query file: a bug in this package, reported at load time rather than at first use."""


def parse(text: str, source: str) -> list[Query]:
    marks = list(_NAME.finditer(text))
    out = []
    for i, m in enumerate(marks):
        body = text[m.end(): marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        name = m.group(2)
        purpose = _PURPOSE.search(body)
        if purpose is None:
            raise QueryError(f"{source}: query {name} has no '-- purpose:' line")
        sql = _PURPOSE.sub("", body, count=1).strip()
        if not sql:
            raise QueryError(f"{source}: query {name} is empty")
        out.append(Query(name, purpose.group(1).strip(), sql, source, m.group(1) == "fragment"))
    return out


def _expand(queries: dict[str, Query], fragments: dict[str, Query]) -> dict[str, Query]:
    used: set[str] = set()

    def text(m: re.Match, q: Query) -> str:
        f = fragments.get(m.group(1))
        if f is None:
            raise QueryError(f"{q.source}: query {q.name} includes unknown fragment {m.group(1)}")
        used.add(f.name)
        return f.sql

    out = {n: Query(q.name, q.purpose, _INCLUDE.sub(lambda m: text(m, q), q.sql), q.source)
           for n, q in queries.items()}
    unused = sorted(set(fragments) - used)
    if unused:
        raise QueryError(f"fragments no query includes: {unused}")
    return out


def load_files(paths: Iterable[Path]) -> dict[str, Query]:
    """The named queries of these files, keyed by name (unique across them), with their includes expanded."""
    queries: dict[str, Query] = {}
    fragments: dict[str, Query] = {}
    for path in paths:
        for q in parse(path.read_text(encoding="utf-8"), path.name):
            known = queries.get(q.name) or fragments.get(q.name)
            if known is not None:
                raise QueryError(f"query {q.name} is defined in both {known.source} and {path.name}")
            (fragments if q.fragment else queries)[q.name] = q
    return _expand(queries, fragments)


def load_file(path: Path) -> dict[str, Query]:
    """The named queries of one file, keyed by name."""
    return load_files([path])
