"""The human text format: one `file:line:col: severity CODE message` line per diagnostic.

    workflows/a.yaml:12:5: error A44201 step 'charge' has no timeout
      hint: add `timeout: 15s` (every step needs one, §3.1)

The hint, when there is one, follows on its own line indented by two spaces, so `grep ': error '` and editors'
problem matchers see exactly one line per finding (a message spanning several lines continues indented the
same way). On a terminal (`TerminalPolicy.snippets`) the source line
and a caret marker are inserted between the two; with `color` the severity, location and caret are colored.
"""

from __future__ import annotations

from collections.abc import Sequence

from anthares44.automation.diagnostics import Diagnostic, Severity

from .base import Reporter
from .snippet import render_snippet
from .terminal import BOLD, CYAN, RED, YELLOW, paint


class TextReporter(Reporter):
    name = "text"

    def render(self, diagnostics: Sequence[Diagnostic], files: Sequence[str]) -> str:
        out: list[str] = []
        cache: dict[str, list[str] | None] = {}
        for diag in diagnostics:
            out.append(self.headline(diag))
            if self.settings.snippets:
                if diag.file not in cache:
                    cache[diag.file] = self.settings.source_lines(diag.file)
                out.extend(render_snippet(diag, cache[diag.file], color=self.settings.color))
            if diag.hint:
                out.append(f"  {paint('hint:', BOLD, CYAN, enabled=self.settings.color)} {diag.hint}")
        return "".join(line + "\n" for line in out)

    def headline(self, diag: Diagnostic) -> str:
        color = self.settings.color
        where = paint(f"{diag.file}:{diag.line}:{diag.col}:", BOLD, enabled=color)
        sev_style = RED if diag.severity is Severity.ERROR else YELLOW
        severity = paint(diag.severity.value, BOLD, sev_style, enabled=color)
        message = diag.message.replace("\r\n", "\n").replace("\n", "\n  ")
        return f"{where} {severity} {paint(diag.code, BOLD, enabled=color)} {message}"
