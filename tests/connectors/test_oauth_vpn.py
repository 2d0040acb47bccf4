"""`oauth2-client-credentials` against a loopback token endpoint + API, and `vpn/http` routes: through an egress
proxy, bound to a local address, and the no-fallback rule (E_TUNNEL_DOWN although the direct route works)."""

from __future__ import annotations

import base64
import dataclasses
import json

import aiohttp
import pytest
from aiohttp import web

from anthares44.automation.errors import E_AUTH_FAILED, E_TUNNEL_DOWN, A44Error
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.connectors.support import closed_port


def bare(make_ctx):
    """A context without its own secret source: the registry's (here a static mapping) is used."""
    return dataclasses.replace(make_ctx(), secrets=None)


CLIENT = {"client_id": "a44-client", "client_secret": "cs-0123456789"}
SECRETS = {"sec_erp_client": json.dumps(CLIENT)}


def oauth_app(state: dict):
    async def token(request):
        state["token_calls"] += 1
        auth = request.headers.get("Authorization", "")
        form = await request.post()
        expected = "Basic " + base64.b64encode(b"a44-client:cs-0123456789").decode()
        if auth != expected or form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "invalid_client"}, status=401)
        state["scope"] = form.get("scope")
        tok = f"tok-{state['token_calls']}"
        state["valid"].add(tok)
        return web.json_response({"access_token": tok, "token_type": "Bearer", "expires_in": state["ttl"]})

    async def api(request):
        got = request.headers.get("Authorization", "")
        state["api_seen"].append(got)
        if got.removeprefix("Bearer ") not in state["valid"]:
            return web.json_response({"error": "invalid_token"}, status=401)
        return web.json_response({"ok": True, "path": request.path})

    app = web.Application()
    app.router.add_post("/oauth/token", token)
    app.router.add_route("*", "/api/{tail:.*}", api)
    return app


@pytest.fixture
def oauth(serve, aio):
    state = {"token_calls": 0, "valid": set(), "api_seen": [], "ttl": 3600}
    base = serve(oauth_app(state))
    reg = ConnectorRegistry({"con_erp": {"id": "con_erp", "type": "http", "baseUrl": base + "/api",
                                         "auth": {"kind": "oauth2-client-credentials", "secretRef": "sec_erp_client",
                                                  "tokenUrl": base + "/oauth/token", "scope": "erp.write"}}},
                            secrets=SECRETS)
    yield state, reg
    aio(reg.aclose())


def test_token_is_fetched_once_and_cached_until_expiry(oauth, make_ctx, aio):
    state, reg = oauth
    state["ttl"] = 100
    for i in range(3):
        out = aio(reg.invoke("con_erp", {"path": f"/orders/{i}"}, bare(make_ctx)))
        assert out["json"] == {"ok": True, "path": f"/api/orders/{i}"}
    assert state["token_calls"] == 1 and state["scope"] == "erp.write"
    assert state["api_seen"] == ["Bearer tok-1"] * 3
    http = reg._builtins["http"]
    real = http.monotonic
    http.monotonic = lambda: real() + 91           # past expires_in minus the 10 % margin
    aio(reg.invoke("con_erp", {"path": "/later"}, bare(make_ctx)))
    assert state["token_calls"] == 2 and state["api_seen"][-1] == "Bearer tok-2"


def test_a_401_refreshes_the_token_once(oauth, make_ctx, aio):
    state, reg = oauth
    aio(reg.invoke("con_erp", {"path": "/a"}, bare(make_ctx)))
    state["valid"].clear()                          # revoked on the far side
    out = aio(reg.invoke("con_erp", {"path": "/b"}, bare(make_ctx)))
    assert out["status"] == 200 and state["token_calls"] == 2
    assert state["api_seen"][-2:] == ["Bearer tok-1", "Bearer tok-2"]
    # a far side that keeps answering 401: one refresh, then the 401 is reported (permanent), no loop
    state["valid"] = type("Never", (set,), {"add": lambda self, x: None})()
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("con_erp", {"path": "/c"}, bare(make_ctx)))
    assert exc.value.code == "E_UPSTREAM_401" and not exc.value.details["retryable"]
    assert state["token_calls"] == 3 and state["api_seen"][-2:] == ["Bearer tok-2", "Bearer tok-3"]


def test_bad_client_credentials_are_a_permanent_auth_error_without_the_secret(serve, make_ctx, aio):
    state = {"token_calls": 0, "valid": set(), "api_seen": [], "ttl": 60}
    base = serve(oauth_app(state))
    reg = ConnectorRegistry({"con_erp": {"id": "con_erp", "type": "http", "baseUrl": base + "/api",
                                         "auth": {"kind": "oauth2-client-credentials", "secretRef": "sec_bad"}}},
                            secrets={"sec_bad": json.dumps({"client_id": "x", "client_secret": "wrong-secret"})})
    with pytest.raises(A44Error) as exc:      # tokenUrl defaults to baseUrl + /oauth/token: .../api/oauth/token
        aio(reg.invoke("con_erp", {"url": base + "/api/x"}, bare(make_ctx)))
    assert exc.value.code == E_AUTH_FAILED and "/api/oauth/token" in exc.value.message
    reg2 = ConnectorRegistry({"con_erp": {"id": "con_erp", "type": "http", "baseUrl": base,
                                          "auth": {"kind": "oauth2-client-credentials", "secretRef": "sec_bad"}}},
                             secrets={"sec_bad": json.dumps({"client_id": "x", "client_secret": "wrong-secret"})})
    with pytest.raises(A44Error) as exc:
        aio(reg2.invoke("con_erp", {"path": "/api/x"}, bare(make_ctx)))
    assert exc.value.code == E_AUTH_FAILED and not exc.value.retryable
    assert "wrong-secret" not in str(exc.value) and "wrong-secret" not in json.dumps(exc.value.details)
    aio(reg.aclose())
    aio(reg2.aclose())


# -- vpn/http -----------------------------------------------------------------------------------------------------
def forward_proxy(seen: list):
    """A minimal HTTP forward proxy (absolute-form requests), standing in for the private network's egress."""

    async def handle(request):
        target = str(request.url) if request.url.is_absolute() else request.path_qs
        seen.append(target)
        async with aiohttp.ClientSession() as s:
            async with s.request(request.method, target, headers={"X-Via": "vpn"},
                                 data=await request.read()) as r:
                return web.Response(status=r.status, body=await r.read(),
                                    content_type=r.content_type)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def target_app(seen: list):
    async def handle(request):
        seen.append({"peer": request.remote, "via": request.headers.get("X-Via"), "path": request.path})
        return web.json_response({"peer": request.remote})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def vpn_registry(base: str, route: dict) -> ConnectorRegistry:
    return ConnectorRegistry({"con_erp_private": {"id": "con_erp_private", "type": "vpn/http", "baseUrl": base,
                                                  "network": "vpn_pj_checkout"}},
                             networks={"pj_default": {"vpn_pj_checkout": route}})


def test_vpn_goes_through_the_configured_proxy(serve, make_ctx, aio):
    target_seen, proxy_seen = [], []
    base = serve(target_app(target_seen))
    proxy = serve(forward_proxy(proxy_seen))
    reg = vpn_registry(base, {"proxy": proxy})
    out = aio(reg.invoke("con_erp_private", {"path": "/orders"}, make_ctx()))
    assert out["status"] == 200
    assert proxy_seen == [base + "/orders"] and target_seen[0]["via"] == "vpn"
    aio(reg.aclose())


def test_proxy_down_is_tunnel_down_and_never_the_direct_route(serve, make_ctx, aio):
    target_seen = []
    base = serve(target_app(target_seen))
    direct = ConnectorRegistry()
    assert aio(direct.invoke("http", {"url": base + "/orders"}, make_ctx()))["status"] == 200   # direct works
    target_seen.clear()
    reg = vpn_registry(base, {"proxy": f"http://127.0.0.1:{closed_port()}"})
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("con_erp_private", {"path": "/orders"}, make_ctx()))
    assert exc.value.code == E_TUNNEL_DOWN and exc.value.retryable
    assert target_seen == []                                        # nothing went the default way
    aio(reg.aclose())
    aio(direct.aclose())


def test_unconfigured_network_is_tunnel_down(serve, make_ctx, aio):
    target_seen = []
    base = serve(target_app(target_seen))
    reg = ConnectorRegistry({"con_v": {"id": "con_v", "type": "vpn/http", "baseUrl": base, "network": "vpn_x"}},
                            networks={"pj_other": {"vpn_x": {"proxy": "http://127.0.0.1:1"}}})
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("con_v", {"path": "/"}, make_ctx()))
    assert exc.value.code == E_TUNNEL_DOWN and target_seen == []
    aio(reg.aclose())


def test_bound_local_address_is_used_and_a_missing_one_is_tunnel_down(serve, make_ctx, aio):
    target_seen = []
    base = serve(target_app(target_seen))
    reg = vpn_registry(base, {"localAddress": "127.0.0.2"})         # loopback /8: a second local address
    out = aio(reg.invoke("con_erp_private", {"path": "/x"}, make_ctx()))
    assert out["json"] == {"peer": "127.0.0.2"}
    aio(reg.aclose())
    reg = vpn_registry(base, {"localAddress": "192.0.2.77"})        # TEST-NET-1: not an address of this host
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("con_erp_private", {"path": "/x"}, make_ctx()))
    assert exc.value.code == E_TUNNEL_DOWN
    assert len(target_seen) == 1
    aio(reg.aclose())


def test_the_routes_file_of_the_settings_reaches_vpn_http_through_the_engines_services(serve, make_ctx, aio,
                                                                                        tmp_path, store):
    from anthares44.automation.runtime.connector_services import connector_services
    from anthares44.automation.settings import Settings

    target_seen, proxy_seen = [], []
    base = serve(target_app(target_seen))
    routes = tmp_path / "routes.json"
    routes.write_text(json.dumps({"*": {"vpn_pj_checkout": {"proxy": serve(forward_proxy(proxy_seen))}}}))
    services = connector_services(store, settings=Settings(home=str(tmp_path / "home"), networks_file=str(routes)))
    reg = ConnectorRegistry({"con_erp_private": {"id": "con_erp_private", "type": "vpn/http", "baseUrl": base,
                                                 "network": "vpn_pj_checkout"}})
    out = aio(reg.invoke("con_erp_private", {"path": "/orders"}, make_ctx(services=services)))
    assert out["status"] == 200 and proxy_seen == [base + "/orders"] and target_seen[0]["via"] == "vpn"
    aio(reg.aclose())
