"""The `github` format: GitHub Actions workflow commands, one annotation per diagnostic.

    ::error file=workflows/a.yaml,line=12,col=5,endLine=12,endColumn=9,title=A44201::step 'charge' has no timeout

Escaping follows the Actions toolkit (`@actions/core` command.ts): in the message `%`, CR and LF become `%25`,
`%0D`, `%0A`; in property values also `:` -> `%3A` and `,` -> `%2C`. A hint is appended to the message on its
own line (an escaped newline, which GitHub shows as a line break). `col`/`endColumn` are emitted only when the
span starts and ends on one line, as GitHub's check annotations support columns only on a single line.
Columns are the diagnostic's own: 1-based, `endColumn` exclusive, the same numbers as in every other format.
"""

from __future__ import annotations

from collections.abc import Sequence

from anthares44.automation.diagnostics import Diagnostic, Severity

from .base import Reporter, relative_path


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


class GithubReporter(Reporter):
    name = "github"

    def render(self, diagnostics: Sequence[Diagnostic], files: Sequence[str]) -> str:
        return "".join(self.annotation(d) + "\n" for d in diagnostics)

    def annotation(self, diag: Diagnostic) -> str:
        command = "error" if diag.severity is Severity.ERROR else "warning"
        props: list[tuple[str, str]] = [("file", relative_path(diag.file, self.settings.root)),
                                        ("line", str(diag.line))]
        if diag.end_line == diag.line:
            props += [("col", str(diag.col)), ("endLine", str(diag.end_line)),
                      ("endColumn", str(diag.end_col))]
        else:
            props.append(("endLine", str(diag.end_line)))
        props.append(("title", diag.code))
        message = diag.message if not diag.hint else f"{diag.message}\nhint: {diag.hint}"
        rendered = ",".join(f"{key}={escape_property(value)}" for key, value in props)
        return f"::{command} {rendered}::{escape_data(message)}"
