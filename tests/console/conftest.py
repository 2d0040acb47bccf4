from __future__ import annotations

from datetime import timedelta

import pytest

from anthares44.automation.runtime.ingestion.tokens import create_token
from tests.ingestion.support import LiveServer
from tests.runtime.engine_support import PROJECT

from .support import Client


@pytest.fixture
def live(pg_url, tmp_path):
    server = LiveServer(pg_url, results_dir=tmp_path / "results")
    yield server
    server.close()


def make_token(live, scopes=("automation:write",), project=PROJECT, name="ops") -> str:
    return live.call(create_token, project, name, list(scopes), timedelta(days=1), None).token


@pytest.fixture
def writer(live) -> Client:
    c = Client(live.port)
    assert c.login(make_token(live)).status == 303
    return c
