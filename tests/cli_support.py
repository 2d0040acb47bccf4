"""The `a44` command run in-process, as a test drives it: exit code and what it printed."""

from __future__ import annotations

from anthares44.automation.cli import main as cli_main


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `a44 ARGV...`; argparse's usage errors exit through SystemExit."""
    try:
        code = cli_main.main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
