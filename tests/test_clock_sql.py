"""One clock (issue 27): the store's SQL never reads the database server's clock. Every instant a query or a
function of the store decides on comes from the caller's `Clock` as a parameter (`:now`, `p_now`), so a test kit
moving a VirtualClock moves the whole engine, and two daemons on one database agree on what "now" is.

Read from the text: the current schema (runtime/store/schema.sql, the one the migrations produce: its function
bodies, triggers and column defaults) and every named query (runtime/store/queries/*.sql, and the workflow
database's stdlib_connectors/*.sql). A column DEFAULT that stamps an audit column with the server's time is allowed
only by name in AUDIT_DEFAULTS (none today: every insert passes its instant)."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "anthares44" / "automation"
SCHEMA = PACKAGE / "runtime" / "store" / "schema.sql"
QUERY_FILES = sorted([*(PACKAGE / "runtime" / "store" / "queries").glob("*.sql"),
                      *(PACKAGE / "stdlib_connectors").glob("*.sql")])

# table.column -> why a server-time default is acceptable there (an audit stamp no decision reads)
AUDIT_DEFAULTS: dict[str, str] = {}

SERVER_TIME = re.compile(
    r"\b(?:now|clock_timestamp|transaction_timestamp|statement_timestamp|timeofday)\s*\("
    r"|\b(?:current_timestamp|localtimestamp|localtime|current_date|current_time)\b"
    r"|'(?:now|today|tomorrow|yesterday)'\s*::", re.I)
CREATE_TABLE = re.compile(r"^CREATE (?:UNLOGGED )?TABLE (\S+) ", re.I)
COLUMN_DEFAULT = re.compile(r"^\s+(\w+)\s.*\bDEFAULT\b", re.I)
ALTER_DEFAULT = re.compile(r"^ALTER TABLE (?:ONLY )?(\S+) ALTER COLUMN (\w+) SET DEFAULT", re.I)


def _code(line: str) -> str:
    """The line without its `--` comment (a `--` inside a '...' literal is text)."""
    quoted = False
    for i, ch in enumerate(line):
        if ch == "'":
            quoted = not quoted
        elif not quoted and line.startswith("--", i):
            return line[:i]
    return line


def server_time_reads(text: str, name: str) -> list[str]:
    """`name:line: text` of every read of the server's clock outside an allowed audit default."""
    out, table = [], None
    for n, line in enumerate(text.splitlines(), 1):
        code = _code(line)
        if m := CREATE_TABLE.match(code):
            table = m.group(1).removeprefix("automation.")
        elif code.startswith(");"):
            table = None
        if not SERVER_TIME.search(code):
            continue
        column = None
        if table is not None and (m := COLUMN_DEFAULT.match(code)):
            column = f"{table}.{m.group(1)}"
        elif m := ALTER_DEFAULT.match(code):
            column = f"{m.group(1).removeprefix('automation.')}.{m.group(2)}"
        if column is None or column not in AUDIT_DEFAULTS:
            out.append(f"{name}:{n}: {line.strip()}")
    return out


def test_the_store_never_reads_the_server_clock():
    found = server_time_reads(SCHEMA.read_text(encoding="utf-8"), "schema.sql")
    for path in QUERY_FILES:
        found += server_time_reads(path.read_text(encoding="utf-8"), path.name)
    assert QUERY_FILES
    assert not found, (
        "the store's SQL reads the server's clock (pass the caller's instant as :now / p_now instead, or list an "
        f"audit column default in AUDIT_DEFAULTS): {found}")


def test_every_form_of_the_server_clock_is_seen():
    """The patterns catch each spelling in a body, a default or dynamic SQL, and nothing in comments or names."""
    reads = ["now()", "NOW ()", "clock_timestamp()", "transaction_timestamp()", "statement_timestamp()",
             "current_timestamp", "CURRENT_DATE", "current_time", "localtimestamp", "localtime", "timeofday()",
             "'now'::timestamptz", "'today'::date"]
    for read in reads:
        assert server_time_reads(f"    update t set at = {read};", "q"), read
        assert server_time_reads(f"CREATE TABLE automation.t (\n    at timestamptz DEFAULT {read}\n);", "s"), read
    fine = "select :now, p_now, current_setting('a44.notify', true) -- not now()\nwhere created_at < $1"
    assert not server_time_reads(fine, "q")
