"""Imports only go down (docs/architecture.md): the connectors and the sdk import nothing of runtime/, app/ or the
edges; the core modules import only core; `http/` (like `cli/`) reaches the runtime through `app` only, and nothing
below the edges imports them; the daemon does not build the HTTP server (app/serve.py composes them). Read from the
source (ast), so an import hidden in a function body counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "anthares44" / "automation"
ROOT = "anthares44.automation"
UPPER = ("runtime", "app", "cli", "api", "http")
CORE = ("durations", "redact", "paths", "named_sql", "db_errors", "errors", "clock", "diagnostics", "jsonenc",
        "attempts", "settings", "tracing")


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


def _top(name: str) -> str | None:
    """`anthares44.automation.runtime.store.core` -> `runtime`; None outside the package."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and name.startswith(ROOT + ".") else None


@pytest.mark.parametrize("package", ["stdlib_connectors", "sdk"])
def test_connectors_and_sdk_never_import_upward(package):
    upward = {f"{m} -> {i}" for m, imps in _modules(package) for i in imps if _top(i) in UPPER}
    assert not upward, sorted(upward)


def test_the_core_modules_import_only_core():
    upward = {f"{m}.py -> {i}" for m in CORE for i in _imports(PACKAGE / f"{m}.py")
              if _top(i) is not None and _top(i) not in CORE}
    assert not upward, sorted(upward)
