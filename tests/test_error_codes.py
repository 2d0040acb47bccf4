"""Every runtime error code a user can see is registered once in errors.py (stable, documented, classified as
retryable or not): a literal `E_...` anywhere in the package that is not registered fails this test."""

from __future__ import annotations

import re
from pathlib import Path

from anthares44.automation.errors import CODES, A44Error, exit_code, http_status

PACKAGE = Path(__file__).resolve().parent.parent / "anthares44" / "automation"
# families with a variable part: E_UPSTREAM_<status> (http), E_EXPR_* (CEL values, mapped to E_EXPR_EVAL)
FAMILIES = ("E_UPSTREAM_", "E_EXPR_")


def test_every_error_code_literal_is_registered():
    missing = {}
    for path in PACKAGE.rglob("*.py"):
        # an `__all__` entry names a Python constant, it is not a code
        text = re.sub(r"__all__\s*=\s*[\[(].*?[\])]", "", path.read_text(encoding="utf-8"), flags=re.S)
        for m in re.finditer(r"[\"'](E_[A-Z0-9_]+)[\"']", text):
            code = m.group(1)
            if code not in CODES and not code.startswith(FAMILIES):
                missing.setdefault(code, path.relative_to(PACKAGE).as_posix())
    assert not missing, f"register these in errors.py: {missing}"


def test_docs_list_every_registered_code():
    doc = (PACKAGE.parent.parent / "docs" / "errors.md").read_text(encoding="utf-8")
    for code, info in CODES.items():
        assert f"`{code}`" in doc, f"docs/errors.md does not list {code}; regenerate it (see its header)"
        assert info.title in doc


def test_codes_are_declared_in_errors_py_only():
    """A module of its own may import a code, never declare one (`E_X = "E_X"`): the table is the one place."""
    declared = {}
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "errors.py" or path.parent.name == "grammar":   # grammar: the E_EXPR_* value family
            continue
        for m in re.finditer(r"^(E_[A-Z0-9_]+)\s*=\s*[\"']", path.read_text(encoding="utf-8"), flags=re.M):
            declared[m.group(1)] = path.relative_to(PACKAGE).as_posix()
    assert not declared, f"import these from errors.py instead: {declared}"


def test_exit_codes_are_declared_in_errors_py_only():
    """The CLI's exit codes (`EXIT_OK = 0`, `EXIT_ERROR, EXIT_USAGE = 1, 2`) have one owner: every verb imports
    them from errors.py, and docs/cli.md's table lists each."""
    import anthares44.automation.errors as errors

    declared = {}
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "errors.py":
            continue
        for m in re.finditer(r"^\s*(EXIT_[A-Z_]+)\s*(?:,\s*EXIT_[A-Z_]+\s*)*=", path.read_text(encoding="utf-8"),
                             flags=re.M):
            declared[m.group(1)] = path.relative_to(PACKAGE).as_posix()
    assert not declared, f"import these from errors.py instead: {declared}"
    doc = (PACKAGE.parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| (\d+) \|", doc, flags=re.M))
    values = {str(v) for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert values <= table, f"docs/cli.md \"Output and exit codes\" lacks {values - table}"


def test_every_code_has_an_http_status_and_an_exit_code():
    for code, info in CODES.items():
        assert 400 <= info.http_status <= 599 and info.exit_code in (1, 2), code
    assert (http_status("E_RUN_NOT_FOUND"), exit_code("E_RUN_NOT_FOUND")) == (404, 1)
    assert (http_status("E_INVALID_ARGUMENT"), exit_code("E_INVALID_ARGUMENT")) == (400, 2)
    assert (http_status("E_UPSTREAM_503"), exit_code("E_UPSTREAM_503")) == (500, 1)    # a family: the defaults


def test_the_http_plane_answers_with_the_table_status():
    from anthares44.automation.http.server import a44_error_response

    for code, info in CODES.items():
        if info.http_status < 500:       # a 5xx logs under a correlation id and needs a real request
            resp = a44_error_response(None, A44Error(code, "m"))
            assert resp.status == info.http_status, code
