"""What `serve` says at start about where workflow SQL runs (engine/app_sql.py): none for a control store named
explicitly, the operator's `A44_APP_DATABASE_URL` template (its password hidden), and a warning naming each
published project whose application database refuses the first connection, so the operator hears of it before a
step fails with it."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

from anthares44.automation.runtime.engine.app_sql import describe, open_app_database
from anthares44.automation.runtime.engine.daemon import WorkerSettings
from tests.runtime.engine_support import PROJECT, node, publish_and_run, workflow
from tests.runtime.pg import with_database


def test_an_explicit_control_store_runs_no_workflow_sql(store, aio):
    app = aio(open_app_database(store, WorkerSettings(database_url="postgresql://x/y"), own_store=False))
    assert describe(app) == "none"


def test_a_project_whose_application_database_refuses_is_named_at_start(store, pg_url, aio, caplog, monkeypatch):
    aio(publish_and_run(store, workflow([node("a")])))
    parts = urlsplit(with_database(pg_url, "app_gone_{project}"))
    template = urlunsplit(parts._replace(netloc=f"app_{{project}}:s3cret@{parts.hostname}:{parts.port}"))
    # a CLI test's dictConfig earlier in the session disables the loggers that existed then
    monkeypatch.setattr(logging.getLogger("a44.lifecycle"), "disabled", False)
    with caplog.at_level(logging.WARNING, logger="a44.lifecycle"):
        app = aio(open_app_database(store, WorkerSettings(app_database_url=template), own_store=False))
    try:
        assert "{project}" in describe(app) and "app_gone_" in describe(app)
        assert "s3cret" not in describe(app)
        (line,) = [r.getMessage() for r in caplog.records if "is refused" in r.getMessage()]
        assert line.startswith(f"workflow SQL of project {PROJECT} is refused: E_DB_UNAVAILABLE ")
        assert 'role "app_pj_default" does not exist' in line
    finally:
        aio(app.aclose())
