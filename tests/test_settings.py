"""Every `A44_*` variable is declared once in settings.py (with its doc, in docs/settings.md), nothing reads the
environment while it is imported, and the values read once reach what they configure."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import pytest

from anthares44.automation.settings import SECRET_PREFIX, VARIABLES, Settings, _markdown

PACKAGE = Path(__file__).resolve().parent.parent / "anthares44" / "automation"
DECLARED = {v.name for v in VARIABLES}


def test_every_variable_the_package_names_is_declared():
    unknown = {}
    for path in PACKAGE.rglob("*.py"):
        for m in re.finditer(r"[\"'](A44_[A-Z0-9_]+)[\"']", path.read_text(encoding="utf-8")):
            if m.group(1) not in DECLARED and m.group(1) != SECRET_PREFIX:
                unknown.setdefault(m.group(1), path.relative_to(PACKAGE).as_posix())
    assert not unknown, f"declare these in settings.py VARIABLES: {unknown}"


def test_docs_list_every_variable():
    doc = (PACKAGE.parent.parent / "docs" / "settings.md").read_text(encoding="utf-8")
    assert doc == _markdown(), "regenerate docs/settings.md (see its header)"


def _import_time_reads(tree: ast.AST):
    """os.environ / os.getenv in statements that run at import: module level and class bodies, not functions."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.ClassDef):
            yield from _import_time_reads(node)
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr in ("environ", "getenv") \
                    and isinstance(sub.value, ast.Name) and sub.value.id == "os":
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    yield sub.lineno


def test_nothing_reads_the_environment_at_import_time():
    found = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lines = [n for n in _import_time_reads(tree)
                 if not (path.name == "settings.py" and path.parent == PACKAGE)]
        if lines:
            found[path.relative_to(PACKAGE).as_posix()] = lines
    assert not found, found


def test_from_env_reads_numbers_flags_and_treats_empty_as_unset():
    s = Settings.from_env({"A44_CONCURRENCY": "8", "A44_WEBHOOK_CACHE_TTL": "0.5", "A44_DEBUG": "1",
                           "A44_PROJECT": "", "UNRELATED": "x"})
    assert (s.concurrency, s.webhook_cache_ttl, s.debug, s.project) == (8, 0.5, True, None)
    with pytest.raises(ValueError, match="A44_CONCURRENCY='many' is not a number"):
        Settings.from_env({"A44_CONCURRENCY": "many"})


def test_a_bad_variable_is_a_usage_error_of_the_cli(monkeypatch, capsys):
    from anthares44.automation.cli.main import main

    monkeypatch.setenv("A44_WEBHOOK_FLUSHERS", "two")
    assert main(["automation", "schema"]) == 2
    assert "A44_WEBHOOK_FLUSHERS='two' is not a number" in capsys.readouterr().err


def test_webhook_tuning_reaches_the_http_planes_store():
    from anthares44.automation.app.serve import HttpSettings
    from anthares44.automation.runtime.ingestion.group_commit import committer_for
    from anthares44.automation.runtime.ingestion.webhook_cache import cache_for

    class Owner:    # the tuning tables are keyed by the store object; nothing of it is called
        pass

    store = Owner()
    env = Settings.from_env({"A44_WEBHOOK_MAX_BATCH": "7", "A44_WEBHOOK_FLUSHERS": "3",
                             "A44_WEBHOOK_CACHE_TTL": "0.25"})
    HttpSettings.from_settings(env, port=0).tune(store)

    async def committer():
        return committer_for(store)
    c = asyncio.run(committer())
    assert (c.max_batch, c.flushers, cache_for(store).ttl) == (7, 3, 0.25)
