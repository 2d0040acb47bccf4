"""The store (runtime/store/core.py, with its Session in session.py) is the only SQL caller: no other module imports the query loader's text or hands
an asyncpg method SQL text; they run named queries by name with named arguments. Read from the source (ast), so a
call in any function counts, like tests/test_layers.py."""

from __future__ import annotations

import ast
from pathlib import Path

from anthares44.automation.runtime.store.vocabulary import load_queries

PACKAGE = Path(__file__).resolve().parent.parent / "anthares44" / "automation"
STORES = {"runtime/store/core.py", "runtime/store/session.py"}     # the store, and its connection type
QUERY_METHODS = {"fetch", "fetchrow", "fetchval", "execute", "executemany", "fetchmany", "prepare", "cursor",
                 "copy_from_query", "copy_to_table", "copy_records_to_table"}


def _sql_text(node: ast.expr, names: set[str]) -> bool:
    """`node` is SQL text (not the name of a query): a literal that names no query, an f-string, a concatenation
    or formatting, a `sql(...)` lookup or a `.sql` attribute."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value not in names
    if isinstance(node, (ast.JoinedStr, ast.BinOp)):
        return True
    if isinstance(node, ast.Call):
        f = node.func
        return getattr(f, "id", None) == "sql" or getattr(f, "attr", None) in ("format", "join")
    return isinstance(node, ast.Attribute) and node.attr == "sql"


def _offences(path: Path, names: set[str]) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("queries"):
            text = {a.name for a in node.names} & {"sql", "load_queries"}
            if text:
                out.append(f"{node.lineno}: imports {sorted(text)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in QUERY_METHODS
                and node.args and _sql_text(node.args[0], names)):
            out.append(f"{node.lineno}: .{node.func.attr}({ast.unparse(node.args[0])[:40]}...)")
    return out


def test_only_the_store_runs_sql_text():
    names = set(load_queries())
    bad = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in STORES and (found := _offences(path, names)):
            bad[rel] = found
    assert not bad, bad


def test_the_scan_sees_the_forms_it_forbids(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from .queries import sql\n"
                   "async def f(conn, n):\n"
                   "    await conn.fetch(sql('run_get'), 1)\n"
                   "    await conn.execute('update automation.runs set state = $1', n)\n"
                   "    await conn.fetchval(f'select {n}')\n"
                   "    await conn.fetchrow('run_get', run_id=n, project=None)\n")
    assert [o.split(":")[0] for o in _offences(src, set(load_queries()))] == ["1", "3", "4", "5"]
