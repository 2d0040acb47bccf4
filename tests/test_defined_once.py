"""Helpers that were once written twice with different behaviour are defined once in the package: one `RunPage`,
one `DEFAULT_PROJECT`, one duration and rate parser, one reconnect backoff. Read from the source (ast), so a copy
in any module counts; everyone else imports the one definition."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "anthares44" / "automation"
ONCE = {"RunPage": "runtime/store/core.py", "DEFAULT_PROJECT": "settings.py", "parse_duration": "durations.py",
        "parse_rate": "durations.py", "reconnect_delay": "durations.py"}


def _definitions() -> dict[str, list[str]]:
    """name -> the modules that define it (class, function or top-level assignment)."""
    found: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                continue
            for name in names:
                if name in ONCE:
                    found.setdefault(name, []).append(module)
    return found


@pytest.mark.parametrize("name", sorted(ONCE))
def test_defined_once(name):
    assert _definitions().get(name) == [ONCE[name]]


def test_no_inline_copy_of_the_reconnect_backoff():
    """The backoff's formula lives in reconnect_delay only: a loop that writes its own drifts from the others."""
    copies = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
              if "2 ** failures" in p.read_text(encoding="utf-8")]
    assert copies == []


def test_the_reconnect_backoff_doubles_to_a_bound():
    from anthares44.automation.durations import reconnect_delay

    assert [reconnect_delay(n) for n in range(1, 7)] == [0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


def test_error_codes_are_imported_from_the_error_table():
    """An `E_*` code comes from errors.py, not through a module that imported it (a re-export hides where the code is
    registered). The expression evaluator's own codes (values inside CEL, grammar/values.py) are their own table."""
    through = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").rsplit(".", 1)[-1] not in ("errors", "values"):
                codes = [a.name for a in node.names if a.name.startswith("E_")]
                if codes:
                    through.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno} from {node.module}: {codes}")
    assert through == []
