"""Fixtures of the connector tests: a StepContext factory, loopback aiohttp servers, a registry closed at the end.

Servers bind 127.0.0.1 on a port the OS picks; nothing in these tests talks to any other address.
"""

from __future__ import annotations

import time

import pytest

from anthares44.automation.stdlib_connectors.protocol import StepContext
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry


@pytest.fixture
def make_ctx():
    def make(*, run_id="run_01TEST", step_id="charge", attempt=1, timeout_s=10.0, secrets=None,
             project_id="pj_default", **kw):
        async def secret_source(ref: str) -> str:
            if secrets is None or ref not in secrets:
                raise KeyError(ref)
            return secrets[ref]

        return StepContext(run_id=run_id, step_id=step_id, attempt=attempt, idempotency_key=f"{run_id}:{step_id}",
                           project_id=project_id, workflow_id="wf_test", deadline=time.monotonic() + timeout_s,
                           secrets=secret_source, **kw)

    return make


@pytest.fixture
def serve(aio):
    """serve(app) -> base URL of the app on 127.0.0.1; stopped at the end of the test."""
    from aiohttp import web

    runners = []

    def start(app) -> str:
        runner = web.AppRunner(app, shutdown_timeout=0.5)
        aio(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        aio(site.start())
        runners.append(runner)
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    yield start
    for runner in runners:
        aio(runner.cleanup())


@pytest.fixture
def registry(aio):
    reg = ConnectorRegistry()
    yield reg
    aio(reg.aclose())

