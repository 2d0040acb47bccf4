from __future__ import annotations

import pytest

from anthares44.automation.app.publishing import publish
from anthares44.automation.runtime.ingestion.metrics import COUNTERS
from anthares44.automation.runtime.ingestion.triggers import current_secret

from .support import LiveServer, P, write_project


@pytest.fixture
def live(pg_url, tmp_path):
    server = LiveServer(pg_url, results_dir=tmp_path / "results")
    COUNTERS.reset()
    yield server
    server.close()


@pytest.fixture
def project(live, tmp_path):
    """The test project published into `live`; returns the webhook secret of trg_hook."""
    report = live.call(publish, P, write_project(tmp_path / "proj"))
    assert report.ok, [d.to_dict() for d in report.diagnostics]
    return live.call(current_secret, P, "trg_hook")["secret"]


@pytest.fixture(scope="module")
def live_project(pg_admin_url, pg_template, tmp_path_factory):
    """One live server + published project for a whole module (hypothesis runs many examples against it)."""
    import asyncio
    import secrets as _s

    from tests.runtime.pg import _admin, with_database

    name = f"a44_test_{_s.token_hex(6)}"
    asyncio.run(_admin(pg_admin_url, f"create database {name} template {pg_template}"))
    tmp = tmp_path_factory.mktemp("fuzz")
    server = LiveServer(with_database(pg_admin_url, name), results_dir=tmp / "results")
    try:
        report = server.call(publish, P, write_project(tmp / "proj"))
        assert report.ok
        yield server, server.call(current_secret, P, "trg_hook")["secret"]
    finally:
        server.close()
        asyncio.run(_admin(pg_admin_url, f"drop database if exists {name} with (force)"))
