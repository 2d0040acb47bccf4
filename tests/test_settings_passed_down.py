"""Below the edges nothing reads an `A44_*` variable: the CLI's `main`, `app.serve`'s callers and the Python API's
entry (`Automation.connect`) read `Settings` once and hand the values down. The one family looked up by name is
`A44_SECRET_<REF>` (runtime/secrets/source.py), known only when a step names its secret."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from anthares44.automation.settings import VARIABLES, Settings

PACKAGE = Path(__file__).resolve().parent.parent / "anthares44" / "automation"
EDGES = ("cli/", "settings.py")


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
        if names:
            found[module] = sorted(names)
    assert not found, f"pass these down from the edge's Settings: {found}"


def test_the_embedded_database_follows_the_settings_not_the_environment(tmp_path, monkeypatch):
    from anthares44.automation.runtime.postgres.database import LocalDatabase, resolve_app_url, resolve_url

    monkeypatch.setenv("A44_DATABASE_URL", "postgresql://env@127.0.0.1:9/env")
    monkeypatch.setenv("A44_APP_DATABASE_URL", "postgresql://env@127.0.0.1:9/env_app_{project}")
    given = Settings(database_url="postgresql://given@127.0.0.1:9/a44", home=str(tmp_path))
    assert resolve_url(given, start=False) == given.database_url
    assert resolve_app_url(given, "pj_x", start=False) is None    # an external control store is never reused
    assert resolve_app_url(Settings(home=str(tmp_path)), "pj_x", start=False) is None   # embedded, not started
    assert LocalDatabase.of(given).dir == tmp_path.resolve() / "pg"
    assert resolve_url(Settings(home=str(tmp_path)), start=False) is None     # embedded, not started


def test_the_project_comes_from_the_settings():
    from anthares44.automation.app.automation import resolve_project

    assert resolve_project(None, Settings(project="pj_from_env")) == "pj_from_env"
    assert resolve_project("pj_flag", Settings(project="pj_from_env")) == "pj_flag"
    assert resolve_project(None, Settings()) == "pj_default"


def test_the_home_the_secret_key_and_the_routes_file_come_from_the_settings(tmp_path, monkeypatch):
    from anthares44.automation.paths import a44_home
    from anthares44.automation.runtime.secrets.file import SecretFile
    from anthares44.automation.stdlib_connectors.network import networks_file, resolve_route

    elsewhere = tmp_path / "env"
    monkeypatch.setenv("A44_HOME", str(elsewhere))
    monkeypatch.setenv("A44_SECRET_KEY", os.urandom(32).hex())
    monkeypatch.setenv("A44_NETWORKS_FILE", str(elsewhere / "networks.json"))
    assert a44_home(None) == Path("~/.a44").expanduser() and a44_home(str(tmp_path)) == tmp_path
    key = os.urandom(32)
    f = SecretFile.of(Settings(home=str(tmp_path), secret_key=key.hex()))
    f.set("sec_x", "v")
    assert f.path == tmp_path / "secrets.json" and not f.key_path.exists()      # sealed with the given key
    assert SecretFile(tmp_path, key=key.hex()).get("sec_x") == "v" and not elsewhere.exists()
    routes = tmp_path / "routes.json"
    routes.write_text(json.dumps({"*": {"vpn_x": {"proxy": "http://127.0.0.1:3128"}}}))
    assert networks_file(Settings(home=str(tmp_path))) == tmp_path / "networks.json"
    assert networks_file(Settings(home=str(tmp_path), networks_file=str(routes))) == routes
    assert resolve_route("pj_a", "vpn_x", path=routes).proxy == "http://127.0.0.1:3128"


def test_the_target_of_a_verb_comes_from_the_settings(tmp_path, monkeypatch):
    from anthares44.automation.app.credentials import select_target, store_login

    monkeypatch.setenv("A44_API_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("A44_API_TOKEN", "a44_pat_env")
    monkeypatch.setenv("A44_HOME", str(tmp_path / "env"))
    home = Settings(home=str(tmp_path))
    assert select_target(home).kind == "local"                      # the environment is not looked at
    given = Settings(home=str(tmp_path), api_url="http://127.0.0.1:10", api_token="a44_pat_given",
                     project="pj_given")
    t = select_target(given)
    assert (t.url, t.token, t.project) == ("http://127.0.0.1:10", "a44_pat_given", "pj_given")
    store_login(tmp_path, "pj_given", "http://127.0.0.1:11", "a44_pat_stored")
    assert select_target(home).token == "a44_pat_stored"          # the login stored in the settings' home
    local = select_target(Settings(home=str(tmp_path), database_url="postgresql://u:pw@127.0.0.1:9/db"))
    assert local.kind == "local" and "pw" not in local.describe() and "127.0.0.1:9/db" in local.describe()


def test_the_engine_builds_its_secret_source_and_object_store_from_its_settings(tmp_path, monkeypatch, store):
    from anthares44.automation.runtime.engine import Engine
    from anthares44.automation.runtime.secrets.file import SecretFile

    monkeypatch.setenv("A44_HOME", str(tmp_path / "env"))
    settings = Settings(home=str(tmp_path / "home"))
    SecretFile.of(settings).set("sec_given", "from-the-settings-home")
    engine = Engine(store, settings=settings)
    assert engine.registry.secrets.get("sec_given") == "from-the-settings-home"
    assert engine.registry.storage is store.results.storage      # storage/* beside the results over 256 KB
    assert not (tmp_path / "env").exists()
