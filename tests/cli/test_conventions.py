"""CLI conventions a user of any modern CLI expects (docs/cli.md "Conventions"): `--version` (also through
`python -m`), bare groups print their help, misspelt verbs and options get a did-you-mean in the one error format,
shell completion generated from the parser (bash, zsh, fish: each driven in the real shell), `--format json` on every
verb that prints a result, and help texts without the contract's section numbers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import version

import pytest

from anthares44.automation.cli.completion import table
from anthares44.automation.cli.main import build_parser

A44 = shutil.which("a44", path=os.path.dirname(sys.executable)) or shutil.which("a44")
pytestmark = pytest.mark.skipif(A44 is None, reason="the a44 console script is not installed")


def a44(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([A44, *args], capture_output=True, text=True, timeout=60, **kw)


def test_version_from_the_script_and_python_dash_m():
    expected = f"a44 {version('anthares44-automation')}\n"
    assert a44("--version").stdout == expected
    r = subprocess.run([sys.executable, "-m", "anthares44.automation", "--version"], capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stdout) == (0, expected)


@pytest.mark.parametrize("argv, shows", [
    ([], ["usage: a44", "automation", "auth", "completion"]),
    (["automation"], ["usage: a44 automation", "publish", "replay"]),
    (["auth", "token"], ["usage: a44 auth token", "create", "revoke"]),
])
def test_a_group_without_its_verb_prints_its_help(argv, shows):
    r = a44(*argv)
    assert r.returncode == 0, r.stderr
    for word in shows:
        assert word in r.stdout


@pytest.mark.parametrize("argv, error, hint", [
    (["automation", "publis", "x.yaml"], "E_INVALID_ARGUMENT argument VERB: invalid choice: 'publis'",
     "hint: did you mean 'publish'?"),
    (["automation", "lint", "--formatt", "json", "x.yaml"], "E_INVALID_ARGUMENT unrecognized arguments: --formatt",
     "hint: did you mean '--format'?"),
    (["completion", "bsh"], "E_INVALID_ARGUMENT argument SHELL: invalid choice: 'bsh'", "hint: did you mean 'bash'?"),
])
def test_usage_errors_have_the_one_format_and_a_did_you_mean(argv, error, hint):
    r = a44(*argv)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert lines[0].startswith("usage: a44")
    assert any(line.startswith(error) for line in lines), r.stderr
    assert lines[-1] == hint


def test_a_usage_error_of_a_verb_itself_has_the_one_format():
    r = a44("automation", "expr", "--vars", "{", "1")
    assert (r.returncode, r.stderr.split(" ", 1)[0]) == (2, "E_INVALID_ARGUMENT"), r.stderr


# --- completion ------------------------------------------------------------------------------------------------
CASES = [  # words typed so far (the last one is being completed) -> what must be offered
    (["a44", "auto"], {"automation"}),
    (["a44", "automation", "pub"], {"publish"}),
    (["a44", "automation", "dlq", ""], {"list", "stats", "show", "redrive"}),
    (["a44", "automation", "runs", "--format", ""], {"text", "json"}),
    (["a44", "automation", "runs", "--st"], {"--state", "--step"}),
    (["a44", "auth", "token", "cr"], {"create"}),
]


@pytest.mark.parametrize("words, offered", CASES)
def test_bash_completion(words, offered):
    script = a44("completion", "bash").stdout
    array = " ".join(f"'{w}'" for w in words)
    r = subprocess.run(["bash", "-c", f'{script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; _a44; '
                                      'printf "%s\\n" "${COMPREPLY[@]}"'], capture_output=True, text=True, timeout=60)
    assert set(r.stdout.split()) == offered, r.stderr


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
@pytest.mark.parametrize("words, offered", CASES)
def test_zsh_completion(words, offered, tmp_path):
    script = a44("completion", "zsh").stdout
    array = " ".join(f"'{w}'" for w in words)
    # bashcompinit runs the function with ksharrays; zsh itself then filters the candidates by what was typed
    r = subprocess.run(["zsh", "-f", "-c", f'{script}\nsetopt ksharrays; COMP_WORDS=({array}); '
                                           f'COMP_CWORD={len(words) - 1}; _a44; printf "%s\\n" "${{COMPREPLY[@]}}"'],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)})
    got = {w for w in r.stdout.split() if w.startswith(words[-1])}
    assert got == offered, r.stderr


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
@pytest.mark.parametrize("words, offered", CASES)
def test_fish_completion(words, offered, tmp_path):
    script = tmp_path / "a44.fish"
    script.write_text(a44("completion", "fish").stdout)
    line = " ".join(words)
    r = subprocess.run(["fish", "--no-config", "-c", f"source {script}; complete -C '{line}'"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)})
    assert {ln.split("\t")[0] for ln in r.stdout.splitlines()} == offered, r.stderr


# --- every verb ------------------------------------------------------------------------------------------------
NO_FORMAT = {  # leaf commands whose output is not a result to format, and why
    "automation compile": "prints the IR, which is JSON",
    "automation schema": "prints JSON Schemas",
    "automation expr": "prints CEL values; --jsonl is its machine format",
    "automation serve": "a daemon: it logs",
    "automation ingest": "a daemon: it logs",
    "completion": "prints a shell script",
}


def test_every_verb_that_prints_a_result_has_format_json():
    nodes = table(build_parser())
    leaves = {path for path, node in nodes.items() if not node.commands}
    missing = sorted(p for p in leaves - set(NO_FORMAT) if "json" not in nodes[p].choices.get("--format", []))
    assert missing == []
    assert set(NO_FORMAT) <= leaves      # an exemption for a verb that no longer exists goes


def test_help_texts_carry_no_contract_section_numbers():
    def walk(parser, path):
        yield path, parser.format_help()
        for action in parser._actions:
            for name, sub in getattr(action, "choices", None).items() if hasattr(action, "_name_parser_map") else ():
                yield from walk(sub, f"{path} {name}")

    found = [path for path, text in walk(build_parser(), "a44") if "§" in text]
    assert found == []


def test_db_and_secrets_answer_in_json(tmp_path):
    env = {**os.environ, "A44_HOME": str(tmp_path), "A44_SECRET_KEY": "ab" * 32}
    env.pop("A44_DATABASE_URL", None)
    r = a44("automation", "secrets", "set", "sec_x", "--format", "json", input="v\n", env=env)
    assert (r.returncode, r.stdout.strip()) == (0, '{"stored": "sec_x", "file": "%s"}' % (tmp_path / "secrets.json"))
    r = a44("automation", "secrets", "rm", "sec_x", "-f", "json", env=env)
    assert r.stdout.strip() == '{"removed": "sec_x", "file": "%s"}' % (tmp_path / "secrets.json")
    r = a44("automation", "db", "stop", "--format", "json", env=env)
    assert (r.returncode, r.stdout.strip()) == (0, '{"kind": "embedded", "stopped": false}')


def test_force_color_colors_piped_lint_output(tmp_path):
    (tmp_path / "wf.yaml").write_text("name: w\nversion: 1\nsteps:\n  - id: a\n    uses: sql/exec\n    timeout: 5s\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    plain = a44("automation", "lint", "wf.yaml", cwd=tmp_path, env=env)
    forced = a44("automation", "lint", "wf.yaml", cwd=tmp_path, env={**env, "FORCE_COLOR": "1"})
    assert "\x1b[" not in plain.stdout and "\x1b[" in forced.stdout
    assert plain.returncode == forced.returncode == 1
