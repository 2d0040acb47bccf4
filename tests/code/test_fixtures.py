"""Recorded histories (fixtures/*.json, the format `sdk.fixtures.export_history` writes) replayed against the
workflow code without a database: each must end as its `expect` says; one must fail as non-deterministic."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from anthares44.automation.sdk import replay_fixture
from tests.code import fixture_workflows

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.json"))


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_recorded_history_replays_as_expected(path):
    doc = json.loads(path.read_text())
    wf = getattr(fixture_workflows, doc["replay"]["qualname"])
    got = asyncio.run(replay_fixture(wf, doc))
    for key, value in doc["expect"].items():
        assert got[key] == value, (key, got)


def test_one_fixture_must_fail_as_nondeterministic():
    outcomes = {json.loads(p.read_text())["expect"]["outcome"] for p in FIXTURES}
    assert "nondeterministic" in outcomes and "completed" in outcomes
