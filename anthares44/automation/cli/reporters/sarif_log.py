"""The `sarif` format: a SARIF 2.1.0 log that GitHub code scanning (`upload-sarif`) accepts.

One run; `tool.driver.rules` lists every registered diagnostic code (`diagnostics.CODES`) plus any code seen in
the results but not registered, sorted by id, each with `name` (PascalCase of its title), `shortDescription`
and `defaultConfiguration.level`. Each result has `ruleId`, `ruleIndex` (into that list), `level`, `message`
and one physical location: the file URI relative to the report root (forward slashes, percent-encoded, with
`uriBaseId: %SRCROOT%`) or an absolute `file://` URI when the file lies outside it, and a region in SARIF's
convention (1-based; `endColumn` one past the last character, as in our diagnostics). `columnKind` says that
columns count Unicode code points.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from urllib.parse import quote

from anthares44.automation.diagnostics import CODES, Diagnostic, Severity

from .base import Reporter, relative_path

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
TOOL_NAME = "a44"
INFORMATION_URI = "https://anthares44.dev/docs/automation/lint"
SRCROOT = "%SRCROOT%"


def rule_name(title: str, code: str) -> str:
    """`duplicate key in mapping` -> `DuplicateKeyInMapping`; falls back to the code."""
    words = re.findall(r"[A-Za-z0-9]+", title)
    return "".join(w[:1].upper() + w[1:] for w in words) or code


def _level(severity: Severity) -> str:
    return "error" if severity is Severity.ERROR else "warning"


def _tool_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("anthares44-automation")
    except Exception:  # noqa: BLE001 - metadata missing in odd installs: omit the field
        return None


class SarifReporter(Reporter):
    name = "sarif"

    def render(self, diagnostics: Sequence[Diagnostic], files: Sequence[str]) -> str:
        return json.dumps(self.log(diagnostics), indent=2, ensure_ascii=False) + "\n"

    def log(self, diagnostics: Sequence[Diagnostic]) -> dict:
        rules, index = self.rules(diagnostics)
        driver: dict = {"name": TOOL_NAME, "informationUri": INFORMATION_URI, "rules": rules}
        tool_version = _tool_version()
        if tool_version:
            driver["semanticVersion"] = tool_version
        return {
            "$schema": SARIF_SCHEMA,
            "version": SARIF_VERSION,
            "runs": [{
                "tool": {"driver": driver},
                "columnKind": "unicodeCodePoints",
                "results": [self.result(d, index) for d in diagnostics],
            }],
        }

    def rules(self, diagnostics: Sequence[Diagnostic]) -> tuple[list[dict], dict[str, int]]:
        seen = {d.code: d for d in diagnostics}
        codes = sorted(set(CODES) | set(seen))
        rules: list[dict] = []
        for code in codes:
            info = CODES.get(code)
            title = info.title if info else f"diagnostic {code}"
            severity = info.severity if info else seen[code].severity
            rules.append({
                "id": code,
                "name": rule_name(title, code),
                "shortDescription": {"text": title},
                "defaultConfiguration": {"level": _level(severity)},
            })
        return rules, {code: i for i, code in enumerate(codes)}

    def result(self, diag: Diagnostic, index: dict[str, int]) -> dict:
        text = diag.message if not diag.hint else f"{diag.message}\nhint: {diag.hint}"
        return {
            "ruleId": diag.code,
            "ruleIndex": index[diag.code],
            "level": _level(diag.severity),
            "message": {"text": text},
            "locations": [{"physicalLocation": {
                "artifactLocation": self.artifact(diag.file),
                "region": {
                    "startLine": max(diag.line, 1),
                    "startColumn": max(diag.col, 1),
                    "endLine": max(diag.end_line, diag.line, 1),
                    "endColumn": max(diag.end_col, 1),
                },
            }}],
        }

    def artifact(self, path: str) -> dict:
        rel = relative_path(path, self.settings.root)
        if rel.startswith("/") or re.match(r"^[A-Za-z]:/", rel):
            return {"uri": "file://" + ("" if rel.startswith("/") else "/") + quote(rel, safe="/:")}
        return {"uri": quote(rel, safe="/"), "uriBaseId": SRCROOT}
