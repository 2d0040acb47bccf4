"""`a44 automation console`: the URL of the serve on this machine, after checking a daemon answers there."""

from __future__ import annotations

import json

from tests.cli_support import run_cli

from .browser_support import free_port


def test_console_prints_the_url_of_a_live_server(live, capsys):
    code, out, _ = run_cli(capsys, "automation", "console", "--port", str(live.port), "--no-open")
    assert code == 0 and out == f"http://127.0.0.1:{live.port}/\n"
    code, out, _ = run_cli(capsys, "automation", "console", "--port", str(live.port), "--no-open", "-f", "json")
    assert code == 0 and json.loads(out) == {"url": f"http://127.0.0.1:{live.port}/", "reachable": True}


def test_console_says_when_no_daemon_answers(capsys):
    port = free_port()
    code, out, err = run_cli(capsys, "automation", "console", "--port", str(port), "--no-open")
    assert code == 1 and out == "" and "E_CONSOLE_UNREACHABLE" in err and f"--http-port {port}" in err
