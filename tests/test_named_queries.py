"""Every named query in runtime/store/queries/*.sql (the control store's) and stdlib_connectors/*.sql (a workflow
database's) is run by the package itself (called by name, or included as a fragment): a query nobody calls is dead
SQL that drifts from the schema unnoticed, and one only the tests call belongs in tests/store_queries.sql, which the
tests in turn must all use."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "anthares44" / "automation"
PACKAGE_SQL = [*sorted((PACKAGE / "runtime" / "store" / "queries").glob("*.sql")),
               *sorted((PACKAGE / "stdlib_connectors").glob("*.sql"))]
TEST_SQL = [ROOT / "tests" / "store_queries.sql"]

# Named queries the package defines and does not run yet, each with what is missing (keep this empty)
NOT_RUN_YET = {
}


def _code(*dirs: str) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for d in dirs for p in (ROOT / d).rglob("*.py")
                     if p.name != Path(__file__).name)


def _unused(sql_files: list[Path], code: str) -> list[str]:
    unused = []
    for sql_file in sql_files:
        for name in re.findall(r"^-- (?:name|fragment): (\S+)", sql_file.read_text(encoding="utf-8"), re.M):
            if not re.search(r"[\"']" + re.escape(name) + r"[\"']", code) and name not in NOT_RUN_YET:
                unused.append(f"{sql_file.relative_to(ROOT)}:{name}")
    return unused


def test_the_query_files_are_where_this_test_looks():
    assert len(PACKAGE_SQL) > 10 and all(p.exists() for p in TEST_SQL), PACKAGE_SQL


def test_every_package_query_is_run_by_the_package():
    sql = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE_SQL)
    included = "\n".join(f'"{name}"' for name in re.findall(r"^[ \t]*--\s*include:\s*(\S+)", sql, re.M))
    unused = _unused(PACKAGE_SQL, _code("anthares44") + included)
    assert not unused, ("named queries the package never runs (dead SQL; one only the tests run goes to "
                        f"tests/store_queries.sql): {unused}")


def test_every_test_query_is_run_by_a_test():
    unused = _unused(TEST_SQL, _code("tests", "bench"))
    assert not unused, f"named queries in tests/ no test runs: {unused}"
