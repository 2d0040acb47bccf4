"""The `json` format: one JSON document with every diagnostic and a summary.

    {"version": 1, "diagnostics": [Diagnostic.to_dict(), ...], "summary": {"errors": 1, "warnings": 0, "files": 3}}

`version` is the document's schema version (bumped only on an incompatible change). Diagnostics keep the order
the linter gives (sorted by file, line, column, code). Output is indented, UTF-8, newline-terminated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from anthares44.automation.diagnostics import Diagnostic

from .base import Reporter, Summary

DOCUMENT_VERSION = 1


class JsonReporter(Reporter):
    name = "json"

    def render(self, diagnostics: Sequence[Diagnostic], files: Sequence[str]) -> str:
        doc = {
            "version": DOCUMENT_VERSION,
            "diagnostics": [d.to_dict() for d in diagnostics],
            "summary": Summary.of(diagnostics, files).to_dict(),
        }
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
