"""The edges are edges: `http/` (like `cli/`) reaches the runtime through `app` only, and nothing below the edges
imports them; the daemon does not build the HTTP server (app/serve.py composes them). Read from the source, every
import, function-level ones included."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "anthares44" / "automation"
ROOT = "anthares44.automation"


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules `path` imports."""
    parts = path.relative_to(PACKAGE.parent.parent).with_suffix("").parts
    package = parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}
    return found


def _modules(under: str):
    for path in (PACKAGE / under).rglob("*.py"):
        yield path.relative_to(PACKAGE).as_posix(), _imports(path)


def test_http_reaches_the_runtime_through_app_only():
    assert (PACKAGE / "http" / "server.py").exists() and not (PACKAGE / "runtime" / "http").exists()
    bad = {m: sorted(i for i in imps if i.startswith(f"{ROOT}.runtime")) for m, imps in _modules("http")}
    assert not {m: i for m, i in bad.items() if i}, bad


def test_nothing_below_the_edges_imports_them():
    bad = {}
    for under in ("runtime", "app", "stdlib_connectors", "sdk", "compiler", "grammar"):
        for m, imps in _modules(under):
            edge = sorted(i for i in imps if i.startswith((f"{ROOT}.http", f"{ROOT}.cli")))
            if edge:
                bad[m] = edge
    assert not bad, bad


def test_the_runtime_does_not_compose_the_process():
    bad = {m: sorted(i for i in imps if i.startswith(f"{ROOT}.app.serve")) for m, imps in _modules("runtime")}
    assert not {m: i for m, i in bad.items() if i}, bad
