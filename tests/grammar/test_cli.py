"""`a44 automation expr`: output, exit codes, caret diagnostics, --jsonl."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from anthares44.automation.cli.main import main

A44 = Path(sys.executable).with_name("a44")


def run(capsys, *argv):
    rc = main(["automation", "expr", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_value_and_vars(capsys):
    rc, out, _ = run(capsys, "data.amountCents > 500000 && data.currency == 'BRL'",
                     "--vars", '{"data": {"amountCents": 600000.0, "currency": "BRL"}}')
    assert rc == 0 and json.loads(out) is True


def test_cel_only_values_render(capsys):
    rc, out, _ = run(capsys, "[b'ab', 1u, int, 1.5, {'k': null}]")
    assert rc == 0 and json.loads(out) == [{"$bytes": "YWI="}, 1, {"$type": "int"}, 1.5, {"k": None}]


def test_compile_issue_with_caret(capsys):
    rc, _, err = run(capsys, "1 + ")
    assert rc == 1
    first, line, caret = err.splitlines()[:3]
    assert first.startswith("<expr>:1:5: error A44300 expected")
    assert caret.index("^") == 2 + 4


def test_eval_error(capsys):
    rc, _, err = run(capsys, "1 / 0")
    assert rc == 1 and "E_EXPR_DIV_ZERO" in err


def test_usage_errors(capsys):
    assert run(capsys, "1", "--vars", "[1")[0] == 2
    assert run(capsys, "1", "--vars", "[1]")[0] == 2
    assert run(capsys)[0] == 2


def test_jsonl_never_aborts():
    lines = ['{"expr": "x + 1", "vars": {"x": 2}}', "not json", '{"expr": "1/0"}', '{"expr": "(("}',
             '{"nope": 1}', '{"expr": "b\'a\'"}']
    proc = subprocess.run([str(A44), "automation", "expr", "--jsonl"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(x) for x in proc.stdout.splitlines()]
    assert out[0] == {"value": 3}
    assert "error" in out[1] and out[2]["error"]["code"] == "E_EXPR_DIV_ZERO"
    assert out[3]["error"]["code"] == "A44300" and "error" in out[4]
    assert out[5] == {"value": {"$bytes": "YQ=="}}
    assert len(out) == len(lines)
