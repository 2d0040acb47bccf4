"""Fixtures for the lint CLI tests: a fixed, hand-built list of diagnostics and their sources."""

from __future__ import annotations

import pytest
from lint_fixtures import SOURCES, make_diagnostics

from anthares44.automation.diagnostics import Diagnostic


@pytest.fixture
def diagnostics() -> list[Diagnostic]:
    return make_diagnostics()


@pytest.fixture
def files() -> list[str]:
    return ["wf/a.yaml", "wf/b, c.yaml", "wf/ok.yaml"]


@pytest.fixture
def sources():
    return lambda path: SOURCES.get(path)
