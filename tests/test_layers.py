"""Imports only go down (docs/ARCHITECTURE layers): the connectors and the sdk import nothing of runtime/, app/ or
the edges, at module level or inside a function; the core modules they share import only core. Read from the
source (ast), so an import hidden in a function body counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "anthares44" / "automation"
UPPER = ("runtime", "app", "cli", "api", "http")
CORE = ("durations", "redact", "paths", "named_sql", "db_errors", "errors", "clock", "diagnostics")


def imported(path: Path) -> set[str]:
    """Top-level names under anthares44.automation that `path` imports (`runtime`, `compiler`, `errors`...)."""
    package = path.relative_to(PKG).parent.parts
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(package[:len(package) - (node.level - 1)]) + (node.module.split(".") if node.module else [])
            names = [base] if base else [[a.name] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("anthares44.automation."):
            names = [node.module.split(".")[2:]]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[2:] for a in node.names if a.name.startswith("anthares44.automation.")]
        else:
            continue
        out.update(n[0] for n in names if n)
    return out


@pytest.mark.parametrize("package", ["stdlib_connectors", "sdk"])
def test_connectors_and_sdk_never_import_upward(package):
    upward = {f"{p.relative_to(PKG)} -> {name}" for p in sorted((PKG / package).rglob("*.py"))
              for name in imported(p) & set(UPPER)}
    assert not upward, sorted(upward)


def test_the_core_modules_import_only_core():
    upward = {f"{m}.py -> {name}" for m in CORE for name in imported(PKG / f"{m}.py") - set(CORE)}
    assert not upward, sorted(upward)
