"""The one diagnostic type every user-facing compile-time problem becomes.

A diagnostic is (file, line, col, end, code, severity, message, hint). Lines and columns are 1-based and
point into the user's file, never into an intermediate string. Codes are stable: they are registered once
here (see `CODES`) with a one-line title, documented in docs/diagnostics.md and covered by golden tests.

Code ranges, one per producer, so parts of the compiler never collide:
  A44001-A44099  YAML source (syntax, duplicate keys, tabs, encoding, size, aliases, file kind)
  A44100-A44199  model shape (unknown key, missing field, wrong type, durations, cron, zones, version)
  A44200-A44299  semantic rules over workflows (steps, connectors, DAG, retry, compensation)
  A44300-A44399  CEL expressions (`if`, `filter`)
  A44400-A44499  Jinja2 templates
  A44500-A44599  SQL parameters
  A44600-A44699  triggers, schedules, queues and connector declarations
  A44900-A44999  lint/publish plumbing (unreadable path, unresolved reference at publish)
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


class Severity(str, enum.Enum):  # noqa: UP042 - StrEnum would change str() of the members
    ERROR = "error"
    WARNING = "warning"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


@dataclass(frozen=True, order=False)
class Span:
    """A region of a source file. 1-based; `end_col` is exclusive (one past the last character)."""

    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    hint: str | None = None

    @classmethod
    def at(cls, code: str, message: str, file: str, span: Span | None,
           severity: Severity | None = None, hint: str | None = None) -> Diagnostic:
        """Build a diagnostic at `span`; severity defaults to the code's registered one."""
        sp = span or Span(1, 1, 1, 1)
        if severity is None:
            severity = CODES[code].severity if code in CODES else Severity.ERROR
        sev = severity
        return cls(code, sev, message, file, sp.line, sp.col, sp.end_line, sp.end_col, hint)

    @property
    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.file, self.line, self.col, self.code, self.message)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "file": self.file, "line": self.line, "col": self.col,
            "endLine": self.end_line, "endCol": self.end_col,
            "code": self.code, "severity": self.severity.value, "message": self.message,
        }
        if self.hint:
            d["hint"] = self.hint
        return d

    def format(self) -> str:
        """The plain one-line text form: `file:line:col: severity CODE message`."""
        text = f"{self.file}:{self.line}:{self.col}: {self.severity.value} {self.code} {self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


@dataclass(frozen=True)
class CodeInfo:
    code: str
    title: str
    severity: Severity = Severity.ERROR
    docs: str = field(default="", compare=False)


CODES: dict[str, CodeInfo] = {}


def register(code: str, title: str, severity: Severity = Severity.ERROR) -> str:
    """Register a stable diagnostic code once; returns the code so modules can keep it as a constant."""
    if not (len(code) == 6 and code.startswith("A44") and code[3:].isdigit()):
        raise ValueError(f"bad diagnostic code {code!r}")
    known = CODES.get(code)
    if known is not None and (known.title != title or known.severity != severity):
        raise ValueError(f"diagnostic code {code} registered twice with different meanings")
    CODES[code] = CodeInfo(code, title, severity)
    return code


def sorted_diagnostics(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Deterministic order for every reporter: file, line, column, code, message; duplicates removed."""
    return sorted(set(diags), key=lambda d: d.sort_key)


def has_errors(diags: Iterable[Diagnostic], strict: bool = False) -> bool:
    return any(d.severity is Severity.ERROR or strict for d in diags)
