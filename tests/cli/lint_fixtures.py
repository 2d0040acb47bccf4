"""Hand-built diagnostics and sources shared by the lint CLI tests (imported by conftest and tests)."""

from __future__ import annotations

from anthares44.automation.diagnostics import CodeInfo, Diagnostic, Severity, sorted_diagnostics

SOURCES = {
    "wf/a.yaml": [
        "name: a",
        "version: 1",
        "steps:",
        "  - id: charge",
        "    uses: connector/payments.authorize",
    ],
    "wf/b, c.yaml": [
        "steps:",
        "\t- id: x",
        "    uses: htp",
    ],
}

FIXED_CODES = {
    "A44001": CodeInfo("A44001", "tab character in indentation", Severity.ERROR),
    "A44201": CodeInfo("A44201", "step has no timeout", Severity.ERROR),
    "A44210": CodeInfo("A44210", "connector plugin not installed", Severity.WARNING),
    "A44220": CodeInfo("A44220", "unknown built-in connector", Severity.ERROR),
}


def make_diagnostics() -> list[Diagnostic]:
    return sorted_diagnostics([
        Diagnostic("A44210", Severity.WARNING, "connector plugin 'payments.authorize' is not installed",
                   "wf/a.yaml", 5, 11, 5, 39),
        Diagnostic("A44201", Severity.ERROR, "step 'charge' has no timeout", "wf/a.yaml", 4, 5, 4, 15,
                   hint="add `timeout: 15s`"),
        Diagnostic("A44220", Severity.ERROR, "unknown connector 'htp'", "wf/b, c.yaml", 3, 11, 3, 14,
                   hint="did you mean 'http'?"),
        Diagnostic("A44001", Severity.ERROR, "tab: in indentation,\n100% wrong", "wf/b, c.yaml", 2, 1, 3, 5),
    ])
