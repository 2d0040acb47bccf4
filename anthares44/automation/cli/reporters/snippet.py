"""Caret snippets: the offending source line with `^~~~` under the diagnostic's span.

    12 |   - id: reserve-funds
       |     ^~~~~~~~~~~~~~~~~

Columns are 1-based code points with an exclusive end (see `diagnostics.Span`). A tab is shown as one space so
the caret stays under the character it points at. A span running over several lines is underlined from its
start to the end of its first line. A line that cannot be read gives no snippet (never an error).
"""

from __future__ import annotations

from anthares44.automation.diagnostics import Diagnostic

from .terminal import BOLD, DIM, GREEN, paint


def render_snippet(diag: Diagnostic, lines: list[str] | None, *, color: bool = False) -> list[str]:
    """The snippet's lines (without line ends); empty when the source line is unavailable."""
    if not lines or diag.line < 1 or diag.line > len(lines):
        return []
    source = lines[diag.line - 1].replace("\t", " ").rstrip("\r")
    col = min(max(diag.col, 1), len(source) + 1)
    if diag.end_line == diag.line:
        width = diag.end_col - col
    else:
        width = len(source) - col + 1
    width = max(width, 1)
    number = str(diag.line)
    gutter = " " * len(number)
    bar = paint("|", DIM, enabled=color)
    marker = paint("^" + "~" * (width - 1), BOLD, GREEN, enabled=color)
    return [
        f" {paint(number, DIM, enabled=color)} {bar} {source}".rstrip(),
        f" {gutter} {bar} {' ' * (col - 1)}{marker}",
    ]
