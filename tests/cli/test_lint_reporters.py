"""Golden output of every lint reporter for one hand-built list of diagnostics (see conftest.py)."""

from __future__ import annotations

import json

import pytest
from lint_fixtures import FIXED_CODES

from anthares44.automation.cli import reporters
from anthares44.automation.cli.reporters import github_annotations, sarif_log
from anthares44.automation.cli.reporters.base import ReportSettings, Summary, relative_path
from anthares44.automation.diagnostics import Diagnostic, Severity


def render(fmt, diagnostics, files, **settings):
    settings.setdefault("root", ".")
    return reporters.create(fmt, ReportSettings(**settings)).render(diagnostics, files)


TEXT_GOLDEN = """\
wf/a.yaml:4:5: error A44201 step 'charge' has no timeout
  hint: add `timeout: 15s`
wf/a.yaml:5:11: warning A44210 connector plugin 'payments.authorize' is not installed
wf/b, c.yaml:2:1: error A44001 tab: in indentation,
  100% wrong
wf/b, c.yaml:3:11: error A44220 unknown connector 'htp'
  hint: did you mean 'http'?
"""

TEXT_SNIPPET_GOLDEN = """\
wf/a.yaml:4:5: error A44201 step 'charge' has no timeout
 4 |   - id: charge
   |     ^~~~~~~~~~
  hint: add `timeout: 15s`
wf/a.yaml:5:11: warning A44210 connector plugin 'payments.authorize' is not installed
 5 |     uses: connector/payments.authorize
   |           ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
wf/b, c.yaml:2:1: error A44001 tab: in indentation,
  100% wrong
 2 |  - id: x
   | ^~~~~~~~
wf/b, c.yaml:3:11: error A44220 unknown connector 'htp'
 3 |     uses: htp
   |           ^~~
  hint: did you mean 'http'?
"""

GITHUB_GOLDEN = """\
::error file=wf/a.yaml,line=4,col=5,endLine=4,endColumn=15,title=A44201::step 'charge' has no timeout%0Ahint: add `timeout: 15s`
::warning file=wf/a.yaml,line=5,col=11,endLine=5,endColumn=39,title=A44210::connector plugin 'payments.authorize' is not installed
::error file=wf/b%2C c.yaml,line=2,endLine=3,title=A44001::tab: in indentation,%0A100%25 wrong
::error file=wf/b%2C c.yaml,line=3,col=11,endLine=3,endColumn=14,title=A44220::unknown connector 'htp'%0Ahint: did you mean 'http'?
"""


def test_registry_names_match_cli_choices():
    from anthares44.automation.cli import cmd_lint
    assert reporters.FORMATS == cmd_lint.FORMATS == ("text", "json", "github", "sarif")
    with pytest.raises(KeyError, match="unknown format 'xml'"):
        reporters.create("xml")


def test_text_golden(diagnostics, files):
    assert render("text", diagnostics, files) == TEXT_GOLDEN


def test_text_lines_are_parseable(diagnostics, files):
    headlines = [line for line in render("text", diagnostics, files).splitlines() if not line.startswith(" ")]
    assert headlines == [d.format().split(" (hint:")[0].split("\n")[0] for d in diagnostics]


def test_text_snippets_golden(diagnostics, files, sources):
    assert render("text", diagnostics, files, snippets=True, source_lines=sources) == TEXT_SNIPPET_GOLDEN


def test_text_snippet_missing_source_is_skipped(files):
    d = Diagnostic("A44901", Severity.ERROR, "path does not exist", "nope.yaml", 1, 1, 1, 1)
    out = render("text", [d], files, snippets=True, source_lines=lambda p: None)
    assert out == "nope.yaml:1:1: error A44901 path does not exist\n"


def test_text_snippet_span_past_end_of_line_and_zero_width(files):
    lines = ["steps:", "  - id: a"]
    at_end = Diagnostic("A44201", Severity.ERROR, "m", "f.yaml", 2, 10, 2, 10)
    out = render("text", [at_end], files, snippets=True, source_lines=lambda p: lines)
    assert out.splitlines()[1:] == [" 2 |   - id: a", "   |          ^"]


def test_text_color_golden(diagnostics, files, sources):
    out = render("text", diagnostics[:1], files, snippets=True, color=True, source_lines=sources)
    assert out == (
        "\x1b[1mwf/a.yaml:4:5:\x1b[0m \x1b[1m\x1b[31merror\x1b[0m \x1b[1mA44201\x1b[0m step 'charge' has no timeout\n"
        " \x1b[2m4\x1b[0m \x1b[2m|\x1b[0m   - id: charge\n"
        "   \x1b[2m|\x1b[0m     \x1b[1m\x1b[32m^~~~~~~~~~\x1b[0m\n"
        "  \x1b[1m\x1b[36mhint:\x1b[0m add `timeout: 15s`\n"
    )
    warning = render("text", diagnostics[1:2], files, color=True)
    assert "\x1b[1m\x1b[33mwarning\x1b[0m" in warning


def test_no_escape_codes_without_color(diagnostics, files, sources):
    for fmt in reporters.FORMATS:
        assert "\x1b" not in render(fmt, diagnostics, files, snippets=True, source_lines=sources)


def test_empty_outputs(files):
    assert render("text", [], files) == ""
    assert render("github", [], files) == ""
    assert json.loads(render("json", [], files)) == {
        "version": 1, "diagnostics": [], "summary": {"errors": 0, "warnings": 0, "files": 3}}
    assert json.loads(render("sarif", [], files))["runs"][0]["results"] == []


def test_json_document(diagnostics, files):
    out = render("json", diagnostics, files)
    assert out.endswith("}\n")
    doc = json.loads(out)
    assert list(doc) == ["version", "diagnostics", "summary"]
    assert doc["version"] == 1
    assert doc["diagnostics"] == [d.to_dict() for d in diagnostics]
    assert doc["diagnostics"][0] == {
        "file": "wf/a.yaml", "line": 4, "col": 5, "endLine": 4, "endCol": 15, "code": "A44201",
        "severity": "error", "message": "step 'charge' has no timeout", "hint": "add `timeout: 15s`"}
    assert doc["summary"] == {"errors": 3, "warnings": 1, "files": 3}


def test_json_keeps_unicode(files):
    d = Diagnostic("A44201", Severity.ERROR, "passo 'reserva' sem timeout — ação", "ç.yaml", 1, 1, 1, 2)
    assert "passo 'reserva' sem timeout — ação" in render("json", [d], files)


def test_github_golden(diagnostics, files):
    assert render("github", diagnostics, files) == GITHUB_GOLDEN


@pytest.mark.parametrize("raw, data, prop", [
    ("plain", "plain", "plain"),
    ("50%", "50%25", "50%25"),
    ("a\nb", "a%0Ab", "a%0Ab"),
    ("a\r\nb", "a%0D%0Ab", "a%0D%0Ab"),
    ("k: v, w", "k: v, w", "k%3A v%2C w"),
    ("%0A literal", "%250A literal", "%250A literal"),
])
def test_github_escaping(raw, data, prop):
    assert github_annotations.escape_data(raw) == data
    assert github_annotations.escape_property(raw) == prop


def test_github_paths_relative_to_root(tmp_path, files):
    d = Diagnostic("A44201", Severity.ERROR, "m", str(tmp_path / "sub" / "x.yaml"), 1, 2, 1, 3)
    out = render("github", [d], files, root=str(tmp_path))
    assert out == "::error file=sub/x.yaml,line=1,col=2,endLine=1,endColumn=3,title=A44201::m\n"


def test_relative_path(tmp_path):
    assert relative_path(str(tmp_path / "a" / "b.yaml"), str(tmp_path)) == "a/b.yaml"
    assert relative_path("a/b.yaml", ".") == "a/b.yaml"
    outside = relative_path("/elsewhere/b.yaml", str(tmp_path))
    assert outside == "/elsewhere/b.yaml"


def test_summary_line():
    assert Summary(0, 0, 0).line() == "0 errors, 0 warnings in 0 files"
    assert Summary(1, 1, 1).line() == "1 error, 1 warning in 1 file"
    assert Summary(2, 3, 4).line() == "2 errors, 3 warnings in 4 files"


# --- SARIF -------------------------------------------------------------------------------------------

@pytest.fixture
def sarif(monkeypatch, diagnostics, files):
    monkeypatch.setattr(sarif_log, "CODES", FIXED_CODES)
    return json.loads(render("sarif", diagnostics, files))


def test_sarif_top_level(sarif):
    assert sarif["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert sarif["version"] == "2.1.0"
    assert len(sarif["runs"]) == 1
    run = sarif["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    driver = run["tool"]["driver"]
    assert driver["name"] == "a44"
    assert driver["informationUri"].startswith("https://")


def test_sarif_rules_from_codes(sarif):
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert rules == [
        {"id": "A44001", "name": "TabCharacterInIndentation",
         "shortDescription": {"text": "tab character in indentation"},
         "defaultConfiguration": {"level": "error"}},
        {"id": "A44201", "name": "StepHasNoTimeout", "shortDescription": {"text": "step has no timeout"},
         "defaultConfiguration": {"level": "error"}},
        {"id": "A44210", "name": "ConnectorPluginNotInstalled",
         "shortDescription": {"text": "connector plugin not installed"},
         "defaultConfiguration": {"level": "warning"}},
        {"id": "A44220", "name": "UnknownBuiltInConnector",
         "shortDescription": {"text": "unknown built-in connector"},
         "defaultConfiguration": {"level": "error"}},
    ]


def test_sarif_results(sarif, diagnostics):
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert len(results) == len(diagnostics)
    for result, diag in zip(results, diagnostics):
        assert result["ruleId"] == diag.code
        assert rules[result["ruleIndex"]]["id"] == diag.code
        assert result["level"] == diag.severity.value
        assert result["message"]["text"].startswith(diag.message)
        (loc,) = result["locations"]
        phys = loc["physicalLocation"]
        assert phys["region"] == {"startLine": diag.line, "startColumn": diag.col,
                                  "endLine": diag.end_line, "endColumn": diag.end_col}
        assert phys["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
    assert results[0]["message"]["text"] == "step 'charge' has no timeout\nhint: add `timeout: 15s`"
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results]
    assert uris == ["wf/a.yaml", "wf/a.yaml", "wf/b%2C%20c.yaml", "wf/b%2C%20c.yaml"]


def test_sarif_unregistered_code_gets_a_rule(monkeypatch, files):
    monkeypatch.setattr(sarif_log, "CODES", {})
    d = Diagnostic("A44999", Severity.WARNING, "m", "x.yaml", 1, 1, 1, 2)
    doc = json.loads(render("sarif", [d], files))
    (rule,) = doc["runs"][0]["tool"]["driver"]["rules"]
    assert rule["id"] == "A44999" and rule["defaultConfiguration"]["level"] == "warning"
    assert doc["runs"][0]["results"][0]["ruleIndex"] == 0


def test_sarif_paths(monkeypatch, tmp_path, files):
    monkeypatch.setattr(sarif_log, "CODES", {})
    inside = Diagnostic("A44201", Severity.ERROR, "m", str(tmp_path / "dir" / "a b.yaml"), 1, 1, 1, 2)
    outside = Diagnostic("A44201", Severity.ERROR, "m", "/other/x.yaml", 1, 1, 1, 2)
    doc = json.loads(render("sarif", [inside, outside], files, root=str(tmp_path)))
    locs = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in doc["runs"][0]["results"]]
    assert locs == [{"uri": "dir/a%20b.yaml", "uriBaseId": "%SRCROOT%"}, {"uri": "file:///other/x.yaml"}]


def test_sarif_satisfies_github_code_scanning_requirements(sarif):
    """The properties GitHub's upload-sarif documents as required for a result to be shown."""
    run = sarif["runs"][0]
    assert isinstance(run["tool"]["driver"]["name"], str)
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert len(ids) == len(set(ids))
    for result in run["results"]:
        assert isinstance(result["message"]["text"], str) and result["message"]["text"]
        assert result["level"] in {"none", "note", "warning", "error"}
        phys = result["locations"][0]["physicalLocation"]
        assert not phys["artifactLocation"]["uri"].startswith(("./", "/"))
        assert "\\" not in phys["artifactLocation"]["uri"]
        region = phys["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert region["endLine"] >= region["startLine"]
        if region["endLine"] == region["startLine"]:
            assert region["endColumn"] >= region["startColumn"]


def test_sarif_validates_against_structural_schema(sarif):
    """A hand-written subset of the SARIF 2.1.0 schema (the official one ships in no pip package)."""
    jsonschema = pytest.importorskip("jsonschema")
    region = {"type": "object", "required": ["startLine"], "properties": {
        k: {"type": "integer", "minimum": 1} for k in ("startLine", "startColumn", "endLine", "endColumn")}}
    message = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
    rule = {"type": "object", "required": ["id"], "properties": {
        "id": {"type": "string"}, "name": {"type": "string"}, "shortDescription": message,
        "defaultConfiguration": {"type": "object", "properties": {
            "level": {"enum": ["none", "note", "warning", "error"]}}}}}
    result = {"type": "object", "required": ["message", "ruleId", "locations"], "properties": {
        "ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": 0},
        "level": {"enum": ["none", "note", "warning", "error"]}, "message": message,
        "locations": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
            "physicalLocation": {"type": "object", "required": ["artifactLocation", "region"], "properties": {
                "artifactLocation": {"type": "object", "required": ["uri"], "properties": {
                    "uri": {"type": "string", "format": "uri-reference"}, "uriBaseId": {"type": "string"}}},
                "region": region}}}}}}}
    schema = {"type": "object", "required": ["version", "runs"], "properties": {
        "$schema": {"type": "string", "format": "uri"}, "version": {"const": "2.1.0"},
        "runs": {"type": "array", "items": {"type": "object", "required": ["tool"], "properties": {
            "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                "type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "informationUri": {"type": "string", "format": "uri"},
                    "rules": {"type": "array", "items": rule}}}}},
            "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
            "results": {"type": "array", "items": result}}}}}}
    jsonschema.validate(sarif, schema, format_checker=jsonschema.FormatChecker())
