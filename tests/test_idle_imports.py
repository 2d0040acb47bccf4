"""What `a44 automation serve` imports before its first run (issue 32 item 2: idle RSS 76 -> 61 MB): the modules its
start imports (cli/cmd_serve.py's `run`, http/process.py, app/serve.py, the engine) load none of the pieces an idle
daemon without `--http-port` does not use: aiohttp's server, jinja2 (the console), prometheus_client (`/metrics`),
lark (the CEL parser: a daemon evaluates compiled programs), cryptography (the secret file's cipher). Each is
imported where it is used. Checked in a fresh interpreter, so what other tests imported does not count."""

from __future__ import annotations

import json
import subprocess
import sys

LAZY = ("aiohttp.web", "jinja2", "prometheus_client", "lark", "cryptography")
START = ("anthares44.automation.cli.main", "anthares44.automation.cli.cmd_serve", "anthares44.automation.app.serve",
         "anthares44.automation.app.alerts", "anthares44.automation.http.process",
         "anthares44.automation.runtime.engine.daemon", "anthares44.automation.runtime.engine.warmup",
         "anthares44.automation.runtime.secrets.file", "anthares44.automation.grammar")


def _loaded(modules: tuple[str, ...], probe: str = "") -> list[str]:
    code = (f"import importlib, json, sys\nfor m in {list(modules)!r}: importlib.import_module(m)\n{probe}\n"
            f"print(json.dumps([m for m in {list(LAZY)!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_daemons_start_imports_none_of_the_lazy_pieces():
    assert _loaded(START) == []


def test_each_piece_still_comes_when_used():
    probe = ("from anthares44.automation.http import HttpServer\n"
             "from anthares44.automation.grammar import compile_expression\n"
             "compile_expression('1 + 1')\n"
             "from anthares44.automation.runtime.secrets.cipher import new_key, open_entry, seal\n"
             "k = new_key(); assert open_entry({seal(k, b'x', 'r')['kid']: k}, seal(k, b'x', 'r'), 'r') == b'x'")
    assert _loaded(START, probe) == list(LAZY)
