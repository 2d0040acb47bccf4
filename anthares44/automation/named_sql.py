"""The format of named SQL files: a query runs from its `-- name:` line to the next one and needs a one-line
`-- purpose:`.

    -- name: create_run
    -- purpose: insert a run, claim its idempotency key and log its creation, in one statement
    insert into ...;

Parameters are named, `:run_id`: a `:` directly followed by a name, not preceded by another `:` (so `x::int`
stays a cast), a name character or a digit (so `a[1:n]` and `a[lo:hi]` stay array slices), and not inside a
string, a quoted identifier, a dollar-quoted body or a comment. At load each query becomes PostgreSQL's `$1..$n`
once, and `Query.params` records which name each position takes (a name used twice is one position). A `$n` left
in a query is a load error: one query, one style.

A `-- fragment: NAME` block (with its own purpose) is SQL text that several queries share, so that one write is
written once: a line `-- include: NAME` in a query stands for the fragment's text. A fragment is not a query (it
cannot run alone); one that no query includes, or an include of an unknown fragment, is a load error.

The control store's queries are `runtime/store/queries/*.sql` (runtime/store/vocabulary.py: the store runs them); the one query
a connector runs on a workflow's own database sits beside it (stdlib_connectors/workflow_db.sql).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

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
    params: tuple[str, ...] = ()   # the name bound to $1, $2, ...
    text: str = ""                 # as written (:name parameters, includes expanded); `sql` is what runs


class QueryError(Exception):
    """A malformed query file: a bug in this package, reported at load time rather than at first use."""


_IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IDENT = _IDENT_START | frozenset("0123456789$")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _skip(sql: str, i: int) -> int:
    """The end of the string, quoted identifier, dollar-quoted body or comment starting at `i`, or `i` if none
    starts there."""
    c, nxt = sql[i], sql[i + 1: i + 2]
    if c == "-" and nxt == "-":
        end = sql.find("\n", i)
        return len(sql) if end < 0 else end
    if c == "/" and nxt == "*":   # PostgreSQL nests block comments
        depth, j = 1, i + 2
        while depth and j < len(sql):
            if sql.startswith("/*", j):
                depth, j = depth + 1, j + 2
            elif sql.startswith("*/", j):
                depth, j = depth - 1, j + 2
            else:
                j += 1
        return j
    if c in "'\"":
        escapes = c == "'" and i > 0 and sql[i - 1] in "eE" and (i < 2 or sql[i - 2] not in _IDENT)
        j = i + 1
        while j < len(sql):
            if escapes and sql[j] == "\\":
                j += 2
                continue
            if sql[j] == c:
                if sql[j + 1: j + 2] == c:      # '' or "" inside
                    j += 2
                    continue
                return j + 1
            j += 1
        return len(sql)
    if c == "$" and (i == 0 or sql[i - 1] not in _IDENT):
        m = _DOLLAR_TAG.match(sql, i)
        if m is not None:
            end = sql.find(m.group(0), m.end())
            return len(sql) if end < 0 else end + len(m.group(0))
    return i


def to_positional(sql: str, where: str) -> tuple[str, tuple[str, ...]]:
    """`sql` with its `:name` parameters replaced by `$1..$n`, and the names in position order."""
    out, order, i, start = [], [], 0, 0
    while i < len(sql):
        end = _skip(sql, i)
        if end > i:
            i = end
            continue
        c = sql[i]
        if c == ":" and sql[i + 1: i + 2] == ":":
            i += 2
            continue
        if c == ":" and sql[i + 1: i + 2] in _IDENT_START and (i == 0 or sql[i - 1] not in _IDENT | {":"}):
            name = _PARAM.match(sql, i + 1).group(0)  # type: ignore[union-attr]  # _IDENT_START was just seen: it matches
            if name not in order:
                order.append(name)
            out.append(sql[start:i] + f"${order.index(name) + 1}")
            i = start = i + 1 + len(name)
            continue
        if c == "$" and sql[i + 1: i + 2].isdigit() and (i == 0 or sql[i - 1] not in _IDENT):
            raise QueryError(f"{where}: positional parameter ${sql[i + 1]}... left; name it (:name)")
        i += 1
    out.append(sql[start:])
    return "".join(out), tuple(order)


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

    def text(m: re.Match[str], q: Query) -> str:
        f = fragments.get(m.group(1))
        if f is None:
            raise QueryError(f"{q.source}: query {q.name} includes unknown fragment {m.group(1)}")
        used.add(f.name)
        return f.sql

    out = {}
    for n, q in queries.items():
        written = _INCLUDE.sub(lambda m: text(m, q), q.sql)  # noqa: B023 - called within this iteration
        positional, params = to_positional(written, f"{q.source}: query {n}")
        out[n] = Query(q.name, q.purpose, positional, q.source, params=params, text=written)
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
