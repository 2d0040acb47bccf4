"""`a44 completion bash|zsh|fish`: print the shell's completion script for `a44` (cli/completion.py)."""

from __future__ import annotations

import argparse

from .completion import SHELLS
from .output import write


def add_group(top) -> None:
    p = top.add_parser("completion", help="print a shell completion script (bash, zsh or fish)",
                       description="Print the completion script of SHELL for a44. bash: eval \"$(a44 completion "
                                   "bash)\" in ~/.bashrc; zsh: the same in ~/.zshrc; fish: a44 completion fish > "
                                   "~/.config/fish/completions/a44.fish",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    p.set_defaults(_run=run)


def run(args) -> int:
    """The script of the whole command line: `main` hands the root parser down as `args._parser`."""
    from .completion import script

    write(script(args.shell, args._parser))
    return 0
