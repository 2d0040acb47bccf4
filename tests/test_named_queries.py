"""Every named query in runtime/store/queries/*.sql (the control store's) and stdlib_connectors/*.sql (a workflow
database's) is run by some code (the package, or the tests and benchmarks that inspect the store through it): a
query nobody calls is dead SQL that drifts from the schema unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "anthares44" / "automation" / "runtime" / "queries"
CONNECTORS = ROOT / "anthares44" / "automation" / "stdlib_connectors"


def test_every_named_query_is_used():
    code = "\n".join(p.read_text(encoding="utf-8") for d in ("anthares44", "tests", "bench")
                     for p in (ROOT / d).rglob("*.py") if p.name != Path(__file__).name)
    unused = []
    for sql_file in sorted([*QUERIES.glob("*.sql"), *CONNECTORS.glob("*.sql")]):
        for name in re.findall(r"^-- name: (\S+)", sql_file.read_text(encoding="utf-8"), re.M):
            if not re.search(r"[\"']" + re.escape(name) + r"[\"']", code):
                unused.append(f"{sql_file.name}:{name}")
    assert not unused, f"named queries no code runs: {unused}"
