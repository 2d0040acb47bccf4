"""`a44 automation lint` as a command: argument parsing, wiring to the linter, exit codes 0/1/2, --strict.

The wiring tests put a stand-in `lint_paths` in front of the real compiler (they check the verb, not the
compiler); `test_lint_examples.py` runs the real thing end to end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass, field

import pytest
from lint_fixtures import make_diagnostics

from anthares44.automation.cli import main as cli_main
from anthares44.automation.diagnostics import Diagnostic, Severity

A44 = shutil.which("a44", path=os.path.dirname(sys.executable)) or shutil.which("a44")

ERROR = Diagnostic("A44201", Severity.ERROR, "step 'charge' has no timeout", "wf/a.yaml", 4, 5, 4, 15)
WARNING = Diagnostic("A44210", Severity.WARNING, "plugin not installed", "wf/a.yaml", 5, 11, 5, 39)


@dataclass
class FakeResult:
    diagnostics: list
    files: list = field(default_factory=lambda: ["wf/a.yaml"])


@pytest.fixture
def stub_linter(monkeypatch):
    """Replace compiler.lint with a module whose lint_paths returns `calls['result']` and records its args."""
    calls: dict = {"result": FakeResult([])}

    def lint_paths(paths, *, strict=False, context=None, known=None):
        calls["paths"], calls["strict"] = paths, strict
        return calls["result"]

    module = types.ModuleType("anthares44.automation.compiler.lint")
    module.lint_paths = lint_paths
    monkeypatch.setitem(sys.modules, "anthares44.automation.compiler.lint", module)
    return calls


def test_clean_exits_0(stub_linter, capsys):
    assert cli_main.main(["automation", "lint", "wf"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == "0 errors, 0 warnings in 1 file\n"
    assert stub_linter["paths"] == ["wf"] and stub_linter["strict"] is False


def test_default_path_is_dot(stub_linter):
    cli_main.main(["automation", "lint"])
    assert stub_linter["paths"] == ["."]


def test_errors_exit_1(stub_linter, capsys):
    stub_linter["result"] = FakeResult([ERROR, WARNING])
    assert cli_main.main(["automation", "lint", "wf"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "wf/a.yaml:4:5: error A44201 step 'charge' has no timeout",
        "wf/a.yaml:5:11: warning A44210 plugin not installed",
    ]
    assert err == "1 error, 1 warning in 1 file\n"


def test_warnings_alone_exit_0_unless_strict(stub_linter, capsys):
    stub_linter["result"] = FakeResult([WARNING])
    assert cli_main.main(["automation", "lint", "wf"]) == 0
    assert "warning A44210" in capsys.readouterr().out
    assert cli_main.main(["automation", "lint", "--strict", "wf"]) == 1
    assert stub_linter["strict"] is True


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_every_format_reports_every_diagnostic(fmt, stub_linter, capsys):
    diags = make_diagnostics()
    stub_linter["result"] = FakeResult(diags, ["wf/a.yaml", "wf/b, c.yaml"])
    assert cli_main.main(["automation", "lint", "--format", fmt, "wf"]) == 1
    out, err = capsys.readouterr()
    assert err == "3 errors, 1 warning in 2 files\n"
    if fmt == "json":
        assert [d["code"] for d in json.loads(out)["diagnostics"]] == [d.code for d in diags]
    elif fmt == "sarif":
        assert [r["ruleId"] for r in json.loads(out)["runs"][0]["results"]] == [d.code for d in diags]
    else:
        for d in diags:
            assert d.code in out
        assert "\x1b" not in out


def test_format_short_option(stub_linter, capsys):
    stub_linter["result"] = FakeResult([ERROR])
    cli_main.main(["automation", "lint", "-f", "github", "wf"])
    assert capsys.readouterr().out.startswith("::error file=wf/a.yaml,line=4,col=5,")


@pytest.mark.parametrize("argv", [
    ["automation", "lint", "--format", "xml"],
    ["automation", "lint", "--color", "sometimes"],
    ["automation", "lint", "--bogus"],
])
def test_usage_errors_exit_2_in_process(argv, stub_linter, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main.main(argv)
    assert exc.value.code == 2
    assert "E_INVALID_ARGUMENT " in capsys.readouterr().err
    assert "paths" not in stub_linter  # the linter never ran


@pytest.mark.skipif(A44 is None, reason="the a44 console script is not installed")
@pytest.mark.parametrize("args, message", [
    (["--format", "xml"], "invalid choice: 'xml'"),
    (["--no-such-option"], "unrecognized arguments: --no-such-option"),
])
def test_usage_error_exit_2_through_console_script(args, message, tmp_path):
    proc = subprocess.run([A44, "automation", "lint", *args, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert proc.stdout == ""


def test_exit_code_helper():
    from anthares44.automation.cli.cmd_lint import exit_code
    assert exit_code([], strict=True) == 0
    assert exit_code([WARNING], strict=False) == 0
    assert exit_code([WARNING], strict=True) == 1
    assert exit_code([ERROR], strict=False) == 1


def test_verb_module_imports_nothing_heavy():
    """The verb and its reporters must not pull in the runtime's heavy dependencies at import time."""
    code = ("import sys; import anthares44.automation.cli.main as m; m.build_parser();"
            "from anthares44.automation.cli import reporters;"
            "[reporters.create(f) for f in reporters.FORMATS];"
            "heavy = [n for n in ('asyncpg', 'aiohttp', 'pydantic', 'ruamel', 'jinja2', 'lark') "
            "if n in sys.modules]; print(','.join(heavy))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    heavy = set(filter(None, proc.stdout.strip().split(",")))
    assert not heavy & {"asyncpg", "aiohttp"}, heavy
