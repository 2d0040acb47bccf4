"""Color and snippet policy of `a44 automation lint`: TTY detection, --color, --no-color, NO_COLOR, TERM=dumb."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import textwrap

import pytest

from anthares44.automation.cli import cmd_lint
from anthares44.automation.cli.reporters.terminal import TerminalPolicy, is_tty, paint


@pytest.mark.parametrize("mode, tty, env, color, snippets", [
    ("auto", False, {}, False, False),
    ("auto", True, {}, True, True),
    ("auto", True, {"NO_COLOR": "1"}, False, True),
    ("auto", True, {"NO_COLOR": ""}, True, True),       # no-color.org: empty means unset
    ("auto", True, {"TERM": "dumb"}, False, True),
    ("never", True, {}, False, True),
    ("never", False, {}, False, False),
    ("always", False, {}, True, True),
    ("always", False, {"NO_COLOR": "1"}, True, True),   # an explicit flag overrides the variable
    ("auto", False, {"FORCE_COLOR": "1"}, True, False),  # force-color.org: a piped stream in color, no snippets
    ("auto", False, {"FORCE_COLOR": "0"}, False, False),
    ("auto", True, {"FORCE_COLOR": "true", "NO_COLOR": "1", "TERM": "dumb"}, True, True),
    ("never", False, {"FORCE_COLOR": "1"}, False, False),  # the flag wins
])
def test_policy(mode, tty, env, color, snippets):
    assert TerminalPolicy.decide(mode, tty=tty, env=env) == TerminalPolicy(color=color, snippets=snippets)


def test_policy_rejects_unknown_mode():
    with pytest.raises(ValueError):
        TerminalPolicy.decide("sometimes", tty=True, env={})


def test_is_tty_on_plain_and_closed_streams():
    assert is_tty(io.StringIO()) is False
    closed = io.StringIO()
    closed.close()
    assert is_tty(closed) is False


def test_paint():
    assert paint("x", "\x1b[1m", enabled=False) == "x"
    assert paint("x", "\x1b[1m", enabled=True) == "\x1b[1mx\x1b[0m"


def _report(diagnostics, files, sources, monkeypatch, *, color="auto", tty=False, env=None, fmt="text"):
    out, err = io.StringIO(), io.StringIO()
    settings = cmd_lint.LintSettings(("wf",), fmt, False, color)
    code = cmd_lint.report(settings, diagnostics, files, stdout=out, stderr=err,
                           stdout_tty=tty, stderr_tty=tty, env=env or {}, source_lines=sources)
    return code, out.getvalue(), err.getvalue()


def test_not_a_tty_is_plain(diagnostics, files, sources, monkeypatch):
    code, out, err = _report(diagnostics, files, sources, monkeypatch)
    assert code == 1
    assert "\x1b" not in out + err and " | " not in out
    assert err == "3 errors, 1 warning in 3 files\n"


def test_tty_gets_snippets_and_color(diagnostics, files, sources, monkeypatch):
    _, out, err = _report(diagnostics, files, sources, monkeypatch, tty=True)
    assert "\x1b[31m" in out and "\x1b[32m^~~~~~~~~~" in out
    assert "|\x1b[0m   - id: charge" in out
    assert err == "\x1b[1m3 errors, 1 warning in 3 files\x1b[0m\n"


def test_tty_with_no_color_env_keeps_snippets_without_color(diagnostics, files, sources, monkeypatch):
    _, out, err = _report(diagnostics, files, sources, monkeypatch, tty=True, env={"NO_COLOR": "yes"})
    assert "\x1b" not in out + err
    assert " 4 |   - id: charge\n   |     ^~~~~~~~~~\n" in out


def test_tty_with_no_color_flag(diagnostics, files, sources, monkeypatch):
    _, out, _ = _report(diagnostics, files, sources, monkeypatch, tty=True, color="never")
    assert "\x1b" not in out and "^~~~" in out


def test_color_always_when_piped(diagnostics, files, sources, monkeypatch):
    _, out, err = _report(diagnostics, files, sources, monkeypatch, color="always",
                          env={"NO_COLOR": "1"})
    assert "\x1b[31m" in out and "^~~~" in out and "\x1b[1m" in err


@pytest.mark.parametrize("fmt", ["json", "github", "sarif"])
def test_machine_formats_never_colored(fmt, diagnostics, files, sources, monkeypatch):
    _, out, _ = _report(diagnostics, files, sources, monkeypatch, tty=True, color="always", fmt=fmt)
    assert "\x1b" not in out and "^~~" not in out


def test_no_color_flag_parses_to_never():
    parser = __import__("anthares44.automation.cli.main", fromlist=["build_parser"]).build_parser()
    args = parser.parse_args(["automation", "lint", "--no-color", "x.yaml"])
    assert cmd_lint.LintSettings.from_args(args) == cmd_lint.LintSettings(("x.yaml",), "text", False, "never")
    args = parser.parse_args(["automation", "lint"])      # no PATH: the project's paths (a44.toml), else "."
    assert cmd_lint.LintSettings.from_args(args) == cmd_lint.LintSettings((), "text", False, "auto")


SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from lint_fixtures import make_diagnostics
    from anthares44.automation.cli import cmd_lint
    import os
    settings = cmd_lint.LintSettings(("wf",), "text", False, "auto")
    sys.exit(cmd_lint.report(settings, make_diagnostics()[:1], ["wf/a.yaml"],
                             stdout=sys.stdout, stderr=sys.stderr, env=os.environ))
""")


def _run_in_pty(env_extra):
    """Run the reporter with stdout/stderr on a real pseudo-terminal; return everything it wrote."""
    script = SCRIPT.format(tests=os.path.dirname(__file__))
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    env.update(env_extra)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=30) == 1
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_real_pseudo_terminal_gets_color():
    out = _run_in_pty({"TERM": "xterm"})
    assert "\x1b[1m\x1b[31merror\x1b[0m" in out
    assert "1 error, 0 warnings in 1 file" in out


def test_real_pseudo_terminal_honours_no_color():
    out = _run_in_pty({"TERM": "xterm", "NO_COLOR": "1"})
    assert "\x1b" not in out
    assert "wf/a.yaml:4:5: error A44201 step 'charge' has no timeout" in out
