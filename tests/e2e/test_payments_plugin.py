"""The example plugin `a44-payments` on its own: its connectors against its stand-in payments API (same event
loop, a real loopback HTTP server), the error mapping, and the stand-in's command line."""

from __future__ import annotations

import asyncio
import sys
import time
from types import SimpleNamespace

import pytest

from tests.e2e.support import PLUGIN, StandIn, e2e_env


@pytest.fixture
def plugin(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN / "src"))
    for name in [m for m in sys.modules if m.startswith("a44_payments")]:
        monkeypatch.delitem(sys.modules, name)
    import a44_payments.connectors as connectors
    import a44_payments.standin as standin
    return SimpleNamespace(c=connectors, standin=standin)


def ctx(run_id="run_1", step_id="reserve-funds", compensation=False, deadline_s=5.0):
    key = f"{run_id}:{step_id}" + (":compensate" if compensation else "")
    return SimpleNamespace(run_id=run_id, step_id=step_id, idempotency_key=key, attempt=1,
                           deadline=time.monotonic() + deadline_s, services={})


def with_standin(plugin, monkeypatch, body, **kw):
    """Run `body(server)` with the stand-in listening on a free loopback port and A44_PAYMENTS_URL pointing at it."""
    from aiohttp import web

    async def go():
        server = plugin.standin.PaymentsStandIn(**kw)
        runner = web.AppRunner(server.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        monkeypatch.setenv("A44_PAYMENTS_URL", f"http://127.0.0.1:{port}")
        try:
            return await body(server)
        finally:
            await plugin.c.authorize.aclose()
            await plugin.c.void.aclose()
            await runner.cleanup()

    return asyncio.run(go())


def test_authorize_is_idempotent_and_void_compensates(plugin, monkeypatch):
    c = plugin.c

    async def body(server):
        params = c.AuthorizeParams(amountCents=249900, reference="inv_8812")
        first = await c.authorize.invoke(params, ctx())
        again = await c.authorize.invoke(params, ctx())
        other = await c.authorize.invoke(params, ctx(run_id="run_2"))
        assert first["status"] == "authorized" and first["amountCents"] == 249900 and not first["replayed"]
        assert again == {**first, "replayed": True}
        assert other["authorizationId"] != first["authorizationId"]
        # as the compensate: of reserve-funds: no params, the authorization is derived from ctx
        voided = await c.void.invoke(c.VoidParams(), ctx(compensation=True))
        assert voided == {"authorizationId": first["authorizationId"], "status": "voided",
                          "voided": [first["authorizationId"]]}
        # voiding twice is harmless; by id works too
        assert (await c.void.invoke(c.VoidParams(authorizationId=first["authorizationId"]), ctx()))["status"] \
            == "voided"
        assert server.by_id[first["authorizationId"]]["status"] == "voided"
        assert server.by_id[other["authorizationId"]]["status"] == "authorized"
        assert [r["idempotency_key"] for r in server.requests] == [
            "run_1:reserve-funds", "run_1:reserve-funds", "run_2:reserve-funds",
            "run_1:reserve-funds:compensate", "run_1:reserve-funds"]

    with_standin(plugin, monkeypatch, body)


def test_void_as_a_plain_step_needs_a_target(plugin, monkeypatch):
    from anthares44.automation.errors import A44Error
    with pytest.raises(A44Error) as exc:
        plugin.c.VoidConnector.target(plugin.c.VoidParams(), ctx(step_id="undo"))
    assert exc.value.code == "E_PARAMS_INVALID"


def test_http_errors_map_to_codes(plugin, monkeypatch):
    from anthares44.automation.errors import A44Error
    c = plugin.c

    async def body(server):
        server.add_failure("/v1/authorizations", 503, 1, retry_after=2)
        with pytest.raises(A44Error) as e503:
            await c.authorize.invoke(c.AuthorizeParams(), ctx())
        assert e503.value.code == "E_UPSTREAM_503" and e503.value.retryable
        assert e503.value.details["retryable"] is True and e503.value.details["retry_after_ms"] == 2000
        with pytest.raises(A44Error) as e402:
            await c.authorize.invoke(c.AuthorizeParams(amountCents=1001), ctx())
        assert e402.value.code == "E_PAYMENT_DECLINED" and not e402.value.retryable
        with pytest.raises(A44Error) as e404:
            await c.void.invoke(c.VoidParams(authorizationKey="run_9:nothing"), ctx())
        assert e404.value.code == "E_UPSTREAM_404" and not e404.value.retryable
        server.add_failure("/v1/authorizations", 422, 1)
        with pytest.raises(A44Error) as e422:
            await c.authorize.invoke(c.AuthorizeParams(), ctx(run_id="run_3"))
        assert e422.value.code == "E_UPSTREAM_422" and e422.value.details["retryable"] is False
        ok = await c.authorize.invoke(c.AuthorizeParams(), ctx(run_id="run_3"))
        assert ok["status"] == "authorized"

    with_standin(plugin, monkeypatch, body, decline_over=1000)


def test_network_failure_and_deadline(plugin, monkeypatch):
    from anthares44.automation.errors import A44Error
    from anthares44.automation.runtime.postgres.embedded import free_port
    monkeypatch.setenv("A44_PAYMENTS_URL", f"http://127.0.0.1:{free_port()}")
    c = plugin.c

    async def go():
        try:
            with pytest.raises(A44Error) as net:
                await c.authorize.invoke(c.AuthorizeParams(), ctx())
            assert net.value.code == "E_NETWORK" and net.value.retryable
            with pytest.raises(A44Error) as late:
                await c.authorize.invoke(c.AuthorizeParams(), ctx(deadline_s=-1))
            assert late.value.code == "E_STEP_TIMEOUT"
        finally:
            await c.authorize.aclose()

    asyncio.run(go())


def test_standin_command_line(tmp_path):
    env = e2e_env(tmp_path, database_url=None)
    proc = StandIn(env, tmp_path / "standin.log", "--fail-authorize", "500", "--fail-times", "1")
    try:
        assert proc.url.startswith("http://127.0.0.1:")
        assert proc.state() == {"authorizations": [], "requests": [], "fail_rules": [
            {"path": "/v1/authorizations", "suffix": None, "status": 500, "times": 1, "retryAfter": None}]}
    finally:
        assert proc.stop() == 0
