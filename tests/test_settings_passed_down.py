"""Below the edges nothing reads an `A44_*` variable: the CLI's `main`, `app.serve`'s callers and the Python API's
entry (`Automation.connect`) read `Settings` once and hand the values down. The one family looked up by name is
`A44_SECRET_<REF>` (runtime/secrets.py), known only when a step names its secret."""

from __future__ import annotations

import ast
from pathlib import Path

from anthares44.automation.settings import VARIABLES, Settings

PACKAGE = Path(__file__).resolve().parent.parent / "anthares44" / "automation"
EDGES = ("cli/", "settings.py")
# still read where they are used; each entry is a module to convert, never one to add
NOT_YET = {"paths.py": {"A44_HOME"}, "runtime/secret_file.py": {"A44_SECRET_KEY"},
           "stdlib_connectors/network.py": {"A44_NETWORKS_FILE"},
           "app/credentials.py": {"A44_API_URL", "A44_API_TOKEN", "A44_PROJECT", "A44_DATABASE_URL"}}


def _constants(tree: ast.AST) -> dict[str, str]:
    """Module-level NAME = "A44_..." constants, so `os.environ.get(KEY_ENV)` counts as a read of its value."""
    return {t.id: n.value.value for n in getattr(tree, "body", []) if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
            for t in n.targets if isinstance(t, ast.Name)}


def _environment_reads(path: Path) -> set[str]:
    """The A44_* names `path` reads through os.environ / os.getenv."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    consts = _constants(tree)
    read = set()
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            f = node.func
            env = isinstance(f.value, ast.Attribute) and f.value.attr == "environ" or \
                isinstance(f.value, ast.Name) and f.value.id == "os" and f.attr == "getenv"
            if env and f.attr in ("get", "getenv", "pop", "setdefault"):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "environ":
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            read.add(key.value)
        elif isinstance(key, ast.Name) and key.id in consts:
            read.add(consts[key.id])
    return {name for name in read if name.startswith("A44_")}


def test_no_module_below_the_edges_reads_an_a44_variable():
    declared = {v.name for v in VARIABLES}
    found = {}
    for path in PACKAGE.rglob("*.py"):
        module = path.relative_to(PACKAGE).as_posix()
        if module.startswith(EDGES):
            continue
        names = _environment_reads(path) & declared
        if names - NOT_YET.get(module, set()):
            found[module] = sorted(names)
    assert not found, f"pass these down from the edge's Settings: {found}"


def test_the_not_yet_list_only_shrinks():
    """An entry that no longer reads its variable is removed from NOT_YET, so the list says what is left."""
    stale = {m: sorted(n - _environment_reads(PACKAGE / m)) for m, n in NOT_YET.items()}
    assert not {m: n for m, n in stale.items() if n}, stale


def test_the_embedded_database_follows_the_settings_not_the_environment(tmp_path, monkeypatch):
    from anthares44.automation.runtime.database import LocalDatabase, resolve_app_url, resolve_url

    monkeypatch.setenv("A44_DATABASE_URL", "postgresql://env@127.0.0.1:9/env")
    monkeypatch.setenv("A44_APP_DATABASE_URL", "postgresql://env@127.0.0.1:9/env_app")
    given = Settings(database_url="postgresql://given@127.0.0.1:9/a44", home=str(tmp_path))
    assert resolve_url(given, start=False) == given.database_url
    assert resolve_app_url(given, start=False) is None        # an external control store is never reused
    assert LocalDatabase.of(given).dir == tmp_path.resolve() / "pg"
    assert resolve_url(Settings(home=str(tmp_path)), start=False) is None     # embedded, not started


def test_the_project_comes_from_the_settings():
    from anthares44.automation.app.automation import resolve_project

    assert resolve_project(None, Settings(project="pj_from_env")) == "pj_from_env"
    assert resolve_project("pj_flag", Settings(project="pj_from_env")) == "pj_flag"
    assert resolve_project(None, Settings()) == "pj_default"
