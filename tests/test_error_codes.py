"""Every runtime error code a user can see is registered once in errors.py (stable, documented, classified as
retryable or not): a literal `E_...` anywhere in the package that is not registered fails this test."""

from __future__ import annotations

import re
from pathlib import Path

from anthares44.automation.errors import CODES

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
