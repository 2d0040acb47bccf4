"""The reporter contract: what every output format receives and how its summary is counted.

A reporter turns the linter's findings (sorted diagnostics plus the list of files examined) into the text
written to stdout. It never decides the exit code and never prints the human summary line; `cmd_lint` does
both, so every format behaves the same. Settings that depend on the terminal (color, caret snippets) are
decided once by `cli.reporters.terminal` and handed in as plain booleans, which keeps every reporter a pure
function of its inputs and easy to golden-test.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from anthares44.automation.diagnostics import Diagnostic, Severity


def read_source_lines(path: str) -> list[str] | None:
    """Default source loader for snippets: the file's lines without line ends, or None if unreadable."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(2_000_000)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace").splitlines()


@dataclass(frozen=True)
class ReportSettings:
    """How to render. `root` is the directory paths are made relative to (formats that need URIs)."""

    color: bool = False
    snippets: bool = False
    root: str = field(default_factory=os.getcwd)
    source_lines: Callable[[str], list[str] | None] = read_source_lines


@dataclass(frozen=True)
class Summary:
    errors: int
    warnings: int
    files: int

    @classmethod
    def of(cls, diagnostics: Sequence[Diagnostic], files: Sequence[str]) -> Summary:
        errors = sum(1 for d in diagnostics if d.severity is Severity.ERROR)
        return cls(errors, len(diagnostics) - errors, len(files))

    def to_dict(self) -> dict:
        return {"errors": self.errors, "warnings": self.warnings, "files": self.files}

    def line(self) -> str:
        """`2 errors, 1 warning in 3 files` (singular/plural by count)."""
        def n(count: int, word: str) -> str:
            return f"{count} {word}{'' if count == 1 else 's'}"
        return f"{n(self.errors, 'error')}, {n(self.warnings, 'warning')} in {n(self.files, 'file')}"


class Reporter:
    """Base class: subclasses set `name` and implement `render`."""

    name: str = ""

    def __init__(self, settings: ReportSettings | None = None):
        self.settings = settings or ReportSettings()

    def render(self, diagnostics: Sequence[Diagnostic], files: Sequence[str]) -> str:
        """The complete stdout text for these findings (empty string allowed)."""
        raise NotImplementedError


def relative_path(path: str, root: str) -> str:
    """`path` relative to `root` with forward slashes when it lies under root; else absolute, forward slashes."""
    absolute = os.path.abspath(path)
    root_abs = os.path.abspath(root)
    try:
        rel = os.path.relpath(absolute, root_abs)
    except ValueError:  # another drive on Windows
        rel = absolute
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return absolute.replace(os.sep, "/")
    return rel.replace(os.sep, "/")
