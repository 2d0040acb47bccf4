"""Every registered diagnostic code is demonstrated and documented, and the documentation is true.

* each code in `diagnostics.CODES` (after importing the compiler, its rules and the expression language) has
  a failing golden case that prints it and a passing golden case next to it (`golden/<code>/`);
* each code has a section in docs/diagnostics.md, and every example there, run again through
  `a44 automation lint`, prints exactly the output the page shows;
* the few codes without a golden case are listed in `EXEMPT` with the reason, and covered here otherwise.

`A44_UPDATE_GOLDEN=1` regenerates docs/diagnostics.md (from `make_diagnostics_doc.py`) before checking it.
"""

from __future__ import annotations

import os
import re

import make_diagnostics_doc as docgen
import pytest
from golden_support import UPDATE_ENV, all_cases, codes_in, run_lint

docgen.import_all_codes()
from anthares44.automation.diagnostics import CODES, Diagnostic, Severity  # noqa: E402

CASES = all_cases()
ALL_CODES = sorted(CODES)

# Codes that have no golden case. Only codes that need an installed plugin (or that nothing emits yet, which
# the table says and a test below re-checks) may be here.
EXEMPT = {
    "A44100": "the fallback for pydantic error types that have no code of their own; every type our models can "
              "produce is mapped, so no file reaches it: test_unmapped_pydantic_error_is_A44100 below feeds one",
    "A44260": "an error of publish mode only (lint reports the same unsettled group as the warning A44261); "
              "tests/approvals/test_approval_compile.py publishes a workflow naming an undeclared group",
    "A44213": "needs an installed connector plugin whose import fails; golden cases are plain files, so "
              "test_plugin_that_fails_to_load_is_A44213 below installs a real broken distribution instead",
}


def _failing(code):
    return [c for c in CASES if c.code == code and not c.passing and code in codes_in(c.expected())]


def _passing(code):
    return [c for c in CASES if c.code == code and c.passing and c.expected() == ""]


def test_the_registry_is_complete():
    """The ranges of the compiler and the grammar are all registered (guards a module not being imported)."""
    for code in ("A44001", "A44101", "A44201", "A44231", "A44300", "A44305", "A44400", "A44500", "A44601",
                 "A44901"):
        assert code in CODES
    for code, info in CODES.items():
        assert re.fullmatch(r"A44\d{3}", code) and info.title and info.severity in Severity


@pytest.mark.parametrize("code", ALL_CODES)
def test_every_code_has_a_failing_and_a_passing_case(code):
    if code in EXEMPT:
        pytest.skip(EXEMPT[code])
    assert _failing(code), f"no failing golden case prints {code}: add golden/{code}/{code}_<what>.yaml"
    assert _passing(code), f"no passing golden case for {code}: add golden/{code}/{code}_ok.yaml"


@pytest.mark.parametrize("code", sorted(EXEMPT))
def test_exemptions_are_still_needed(code):
    assert code in CODES, f"{code} is exempt but not registered any more: drop it from EXEMPT"
    assert not _failing(code), f"{code} now has a golden case: drop it from EXEMPT"
    assert code in docgen.NO_EXAMPLE


def test_every_golden_code_is_registered():
    unknown = {c.code for c in CASES if c.code} - set(CODES)
    printed = set().union(*(codes_in(c.expected()) for c in CASES)) - set(CODES)
    assert not unknown and not printed, (unknown, printed)


# ---------------------------------------------------------------- docs/diagnostics.md
def _doc_text() -> str:
    if os.environ.get(UPDATE_ENV) == "1":
        docgen.main()
    assert docgen.DOC.exists(), "docs/diagnostics.md is missing: run tests/compiler/make_diagnostics_doc.py"
    return docgen.DOC.read_text(encoding="utf-8")


DOC_TEXT = _doc_text()
DOC_EXAMPLES = docgen.parse(DOC_TEXT)


@pytest.mark.parametrize("code", ALL_CODES)
def test_every_code_is_documented(code):
    section = re.search(rf"^## {code}\s*$(.*?)(?=^## |\Z)", DOC_TEXT, re.MULTILINE | re.DOTALL)
    assert section, f"docs/diagnostics.md has no section '## {code}'"
    assert CODES[code].title in section.group(1)
    examples = [e for e in DOC_EXAMPLES if e.code == code]
    if code in EXEMPT:
        assert "No example" in section.group(1)
        return
    failing = [e for e in examples if code in codes_in(e.output)]
    assert failing, f"the {code} section shows no example whose output has {code}"
    assert re.search(r"```yaml|<!-- generated:|<!-- file:", section.group(1))


@pytest.mark.parametrize("example", DOC_EXAMPLES, ids=lambda e: f"{e.code}-{'-'.join(e.args)}")
def test_documented_example_output_is_true(example, tmp_path):
    assert example.files or example.generated
    assert docgen.run_example(example, tmp_path) == example.output


def test_doc_is_in_sync_with_the_goldens():
    """The page is what the generator makes from the goldens today (regenerate it, don't hand-edit it)."""
    assert docgen.render() == DOC_TEXT, "docs/diagnostics.md is stale: run tests/compiler/make_diagnostics_doc.py"


def test_preferred_examples_exist():
    names = {c.name for c in CASES}
    assert set(docgen.PREFERRED.values()) <= names


def test_escaped_bytes_round_trip():
    raw = b"\xef\xbb\xbfname: caf\xc3\xa9\xff\r\n\tx\r"
    assert docgen._unescape(docgen._escape(raw)) == raw
    assert docgen._escape(raw).startswith("\\xef\\xbb\\xbf")


def test_doc_parser_reads_what_the_generator_writes():
    """Guards the doc test itself: the parser finds one failing example per documented code."""
    documented = {e.code for e in DOC_EXAMPLES if e.code in codes_in(e.output)}
    assert documented == set(CODES) - set(EXEMPT)
    raw = next(e for e in DOC_EXAMPLES if e.code == "A44004" and "A44004" in e.output)
    assert any(b"\xe9" in v for v in raw.files.values())  # escaped bytes restored
    tabs = next(e for e in DOC_EXAMPLES if e.code == "A44003" and "A44003" in e.output)
    assert any(b"\t" in v for v in tabs.files.values())


# ---------------------------------------------------------------- exempt codes, covered without goldens
def _lint_with_plugins(tmp_path, monkeypatch, source, entry_points, text):
    from tests.plugin_dist import install_plugin

    install_plugin(tmp_path, monkeypatch, source, entry_points)
    (tmp_path / "workflow.yaml").write_text(text)
    out, _err, code = run_lint(tmp_path, ["workflow.yaml"])
    return out, code


PLUGIN_WF = """name: plugged
version: 1
steps:
  - id: charge
    uses: connector/acme.charge
    timeout: 15s
    with: {amount: 10}
"""


def test_plugin_that_fails_to_load_is_A44213(tmp_path, monkeypatch):
    source = "import acme_sdk_that_is_not_installed\ncharge = object()\n"
    out, code = _lint_with_plugins(tmp_path, monkeypatch, source, {"acme.charge": "charge"}, PLUGIN_WF)
    assert out == ("workflow.yaml:5:11: error A44213 plugin 'connector/acme.charge' failed to load: "
                   "ModuleNotFoundError: No module named 'acme_sdk_that_is_not_installed'\n")
    assert code == 1


PARAMS_PLUGIN = """
from pydantic import BaseModel, ConfigDict

class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amount: int

class Charge:
    name = "acme.charge"
    params_model = Params

    async def invoke(self, params, ctx):
        return {"charged": params.amount}

charge = Charge()
"""


def test_plugin_that_loads_is_clean_and_its_params_model_is_used(tmp_path, monkeypatch):
    eps = {"acme.charge": "charge"}
    out, code = _lint_with_plugins(tmp_path, monkeypatch, PARAMS_PLUGIN, eps, PLUGIN_WF)
    assert (out, code) == ("", 0)
    (tmp_path / "workflow.yaml").write_text(PLUGIN_WF.replace("amount: 10", "amount: ten"))
    out, _err, code = run_lint(tmp_path, ["workflow.yaml"])
    assert "A44103" in out and code == 1


def test_plugin_params_on_the_step_are_A44212(tmp_path, monkeypatch):
    text = PLUGIN_WF.replace("    with: {amount: 10}\n", "    amount: 10\n")
    out, code = _lint_with_plugins(tmp_path, monkeypatch, PARAMS_PLUGIN, {"acme.charge": "charge"}, text)
    assert ("workflow.yaml:7:5: error A44212 'amount' is not a step key; parameters of plugin "
            "'connector/acme.charge' go under 'with:'\n") in out
    assert code == 1


def test_unresolved_reference_is_an_error_at_publish(tmp_path):
    """A44211 is a warning in lint and an error in publish mode (same finding, other severity)."""
    from anthares44.automation.compiler.lint import lint_paths

    (tmp_path / "w.yaml").write_text(PLUGIN_WF.replace("acme.charge", "acme.nowhere_installed"))
    lint = lint_paths([str(tmp_path / "w.yaml")])
    publish = lint_paths([str(tmp_path / "w.yaml")], mode="publish")
    assert [(d.code, d.severity) for d in lint.diagnostics] == [("A44211", Severity.WARNING)]
    assert [(d.code, d.severity) for d in publish.diagnostics] == [("A44211", Severity.ERROR)]


def test_diagnostic_text_form():
    d = Diagnostic.at("A44201", "step 'x' has no timeout", "w.yaml", None, hint="add one")
    assert d.format() == "w.yaml:1:1: error A44201 step 'x' has no timeout (hint: add one)"
    assert Diagnostic.at("A44211", "m", "w.yaml", None).severity is Severity.WARNING


def test_unmapped_pydantic_error_is_A44100():
    from anthares44.automation.compiler.models import Queue
    from anthares44.automation.compiler.source import load_text
    from anthares44.automation.compiler.validation import _diagnostic

    src = load_text("id: q_x\nmaxConcurrency: 3\n", "queue.yaml")
    err = {"type": "some_future_type", "loc": ("maxConcurrency",), "msg": "Value is odd", "ctx": {}}
    d = _diagnostic(src, Queue, src.data, (), err)
    assert (d.code, d.line, d.col, d.message) == ("A44100", 2, 17, "maxConcurrency: Value is odd")
