"""A live REST server on 127.0.0.1 over the test database with the ingestion tests' project published, tokens of
each scope, and a JSON client that names the token it sends."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from anthares44.automation.app.automation import Automation
from anthares44.automation.runtime.ingestion.tokens import create_token
from tests.ingestion.support import LiveServer, P, bearer, request, write_project


class Api:
    def __init__(self, live: LiveServer, tokens: dict[str, str]):
        self.live, self.tokens = live, tokens

    def __call__(self, method: str, path: str, body=None, *, as_: str = "admin", raw: bytes | None = None):
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        status, doc, _ = request(self.live.port, method, "/v1/automation" + path, data, bearer(self.tokens[as_]))
        return status, doc


def tokens_of(live: LiveServer) -> dict[str, str]:
    return {s: live.call(create_token, P, f"t-{s}", [f"automation:{s}"], timedelta(days=1)).token
            for s in ("read", "write", "admin")}


def publish_project(live: LiveServer, root) -> None:
    async def publish(store):
        auto = Automation(store, P)
        return await auto.publish(write_project(root))
    assert live.call(publish).ok


@pytest.fixture
def api(pg_url, tmp_path):
    live = LiveServer(pg_url, results_dir=tmp_path / "results")
    try:
        publish_project(live, tmp_path / "proj")
        yield Api(live, tokens_of(live))
        log = live.log_text()
        assert "Traceback" not in log and "E_INTERNAL" not in log, log[-4000:]
    finally:
        live.close()


@pytest.fixture
def target(api, pg_url, tmp_path, monkeypatch):
    """target(where) -> the CLI arguments that send a verb to the database ("local") or to the live daemon with
    no database URL at all ("remote"), the environment set for that."""
    monkeypatch.setenv("A44_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("A44_PROJECT", P)
    monkeypatch.delenv("A44_API_URL", raising=False)

    def args(where: str) -> list[str]:
        if where == "local":
            monkeypatch.setenv("A44_DATABASE_URL", pg_url)
            monkeypatch.delenv("A44_API_TOKEN", raising=False)
            return ["--local"]
        monkeypatch.delenv("A44_DATABASE_URL", raising=False)
        monkeypatch.setenv("A44_API_TOKEN", api.tokens["admin"])
        return ["--api-url", api.live.url]
    return args
