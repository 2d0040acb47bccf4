"""Terminal policy: whether output gets ANSI color and caret snippets, and the few ANSI styles used.

Rules (documented in docs/lint.md):
- `--color always` forces color and snippets; `--color never` (or `--no-color`) disables color.
- `--color auto` (default) colors only when the stream is a terminal, `TERM` is not `dumb` and `NO_COLOR` is
  unset or empty (https://no-color.org: a command-line flag overrides the variable, so `always` wins over it).
  `FORCE_COLOR` set to anything but `0`/`false` colors a piped stream too (https://force-color.org: CI logs that
  render ANSI); it wins over `NO_COLOR` and `TERM=dumb`, and `--color never` wins over it.
- Caret snippets follow the terminal, not the color: shown on a TTY (or with `always`), never when the
  output is piped, so CI logs and golden files stay one line per finding.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

COLOR_MODES = ("auto", "always", "never")

RESET = "\x1b[0m"
BOLD = "\x1b[1m"
RED = "\x1b[31m"
YELLOW = "\x1b[33m"
GREEN = "\x1b[32m"
CYAN = "\x1b[36m"
DIM = "\x1b[2m"


def is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or fake streams
        return False


@dataclass(frozen=True)
class TerminalPolicy:
    color: bool
    snippets: bool

    @classmethod
    def decide(cls, mode: str, *, tty: bool, env: Mapping[str, str] | None = None) -> TerminalPolicy:
        """Pure decision from the color mode, whether the stream is a TTY, and the environment."""
        if mode not in COLOR_MODES:
            raise ValueError(f"color mode must be one of {', '.join(COLOR_MODES)}")
        env = os.environ if env is None else env
        if mode == "always":
            return cls(color=True, snippets=True)
        if mode == "never":
            return cls(color=False, snippets=tty)
        if env.get("FORCE_COLOR", "").strip().lower() not in ("", "0", "false"):
            return cls(color=True, snippets=tty)
        no_color = bool(env.get("NO_COLOR", ""))
        dumb = env.get("TERM", "") == "dumb"
        return cls(color=tty and not no_color and not dumb, snippets=tty)

    @classmethod
    def for_stream(cls, mode: str, stream: TextIO, env: Mapping[str, str] | None = None) -> TerminalPolicy:
        return cls.decide(mode, tty=is_tty(stream), env=env)


def paint(text: str, *styles: str, enabled: bool) -> str:
    """Wrap `text` in ANSI styles when enabled; identity otherwise."""
    if not enabled or not styles or not text:
        return text
    return "".join(styles) + text + RESET
