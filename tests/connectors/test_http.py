"""The http connector against real aiohttp servers on 127.0.0.1: what is sent, what is captured, how failures
are classified (§6.3, §14)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web

from anthares44.automation.errors import E_NETWORK, E_PARAMS_INVALID, E_STEP_TIMEOUT, A44Error
from anthares44.automation.stdlib_connectors.http import retry_after_ms
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.connectors.support import closed_port, run_step


def recording_app(seen: list, handler=None):
    """An app that records every request (method, path, query, headers, body) and answers with `handler`."""

    async def any_request(request: web.Request):
        seen.append({"method": request.method, "path": request.path, "query": dict(request.query),
                     "multi": list(request.query.items()), "headers": dict(request.headers),
                     "body": await request.read()})
        if handler is not None:
            return await handler(request)
        return web.json_response({"ok": True, "n": 1}, headers={"ETag": '"v1"', "X-Other": "dropped"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", any_request)
    return app


def _status(status, headers=None, body="nope"):
    async def handler(request):
        return web.Response(status=status, text=body, headers=headers or {})
    return handler


def test_json_success_sends_key_query_headers_and_json_body(serve, registry, make_ctx, aio):
    seen = []
    base = serve(recording_app(seen))
    result = aio(run_step(registry, "http", {
        "method": "POST", "url": base + "/charges", "headers": {"X-Tenant": 7},
        "query": {"a": 1, "flag": True, "skip": None, "many": ["x", "y"]},
        "json": {"amountCents": 500}}, make_ctx()))
    assert result == {"status": 200, "headers": {"content-type": "application/json; charset=utf-8", "etag": '"v1"'},
                      "json": {"ok": True, "n": 1}}
    req = seen[0]
    assert req["method"] == "POST" and req["path"] == "/charges"
    assert req["headers"]["Idempotency-Key"] == "run_01TEST:charge"
    assert req["headers"]["X-Tenant"] == "7"
    assert req["multi"] == [("a", "1"), ("flag", "true"), ("many", "x"), ("many", "y")]
    assert json.loads(req["body"]) == {"amountCents": 500}
    assert req["headers"]["Content-Type"].startswith("application/json")


def test_same_key_on_every_attempt_and_raw_body(serve, registry, make_ctx, aio):
    seen = []
    base = serve(recording_app(seen))
    for attempt in (1, 2):
        aio(run_step(registry, "http", {"method": "PUT", "url": base + "/x", "body": "raw text"},
                     make_ctx(attempt=attempt)))
    assert [r["headers"]["Idempotency-Key"] for r in seen] == ["run_01TEST:charge"] * 2
    assert seen[0]["body"] == b"raw text"


def test_text_response(serve, registry, make_ctx, aio):
    async def text(request):
        return web.Response(text="héllo", content_type="text/plain")
    base = serve(recording_app([], text))
    result = aio(run_step(registry, "http", {"url": base + "/t"}, make_ctx()))
    assert result["text"] == "héllo" and "json" not in result and "truncated" not in result


def test_invalid_json_body_is_kept_as_text(serve, registry, make_ctx, aio):
    async def bad(request):
        return web.Response(text="{not json", content_type="application/json")
    base = serve(recording_app([], bad))
    assert aio(run_step(registry, "http", {"url": base}, make_ctx()))["text"] == "{not json"


def test_body_over_the_cap_is_cut_and_flagged(serve, registry, make_ctx, aio):
    big = {"data": "x" * 50_000}

    async def large(request):
        return web.json_response(big)
    base = serve(recording_app([], large))
    result = aio(run_step(registry, "http", {"url": base, "maxResponseBytes": 1000}, make_ctx()))
    assert result["truncated"] is True and len(result["text"]) == 1000 and "json" not in result
    assert result["text"].startswith('{"data": "xxx')
    whole = aio(run_step(registry, "http", {"url": base}, make_ctx()))
    assert whole["json"] == big and "truncated" not in whole


def test_retryable_and_permanent_statuses(serve, registry, make_ctx, aio):
    statuses = {"/503": 503, "/422": 422, "/500": 500, "/404": 404}

    async def by_path(request):
        return web.Response(status=statuses[request.path], text='{"error": "x", "token": "t0k"}',
                            content_type="application/json")
    base = serve(recording_app([], by_path))

    def fail(path, **extra):
        with pytest.raises(A44Error) as exc:
            aio(run_step(registry, "http", {"url": base + path, **extra}, make_ctx()))
        return exc.value

    e = fail("/503")
    assert e.code == "E_UPSTREAM_503" and e.retryable and e.details["retryable"] is True
    assert e.details["body"] == {"error": "x", "token": "[redacted]"}  # error bodies are redacted too
    e = fail("/422")
    assert e.code == "E_UPSTREAM_422" and not e.retryable and e.details["retryable"] is False
    e = fail("/404")
    assert e.details["retryable"] is False
    # a custom retryOn is honoured through details["retryable"], whatever the code's default says
    e = fail("/500", retryOn=[503])
    assert e.code == "E_UPSTREAM_500" and e.details["retryable"] is False
    e = fail("/404", retryOn=[404])
    assert e.details["retryable"] is True


def test_429_retry_after_seconds_and_http_date(serve, registry, make_ctx, aio):
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    answers = {"/secs": {"Retry-After": "7"}, "/date": {"Retry-After": when}, "/none": {}}

    async def limited(request):
        return web.Response(status=429, text="slow down", headers=answers[request.path])
    base = serve(recording_app([], limited))
    got = {}
    for path in answers:
        with pytest.raises(A44Error) as exc:
            aio(run_step(registry, "http", {"url": base + path}, make_ctx()))
        assert exc.value.code == "E_UPSTREAM_429" and exc.value.retryable
        got[path] = exc.value.details.get("retry_after_ms")
    assert got["/secs"] == 7000
    assert 27_000 <= got["/date"] <= 30_000
    assert got["/none"] is None


def test_retry_after_parsing():
    now = time.time()
    assert retry_after_ms("120") == 120_000
    assert retry_after_ms(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0  # in the past
    assert retry_after_ms("soon") is None and retry_after_ms(None) is None


def test_connection_refused_is_network(registry, make_ctx, aio):
    with pytest.raises(A44Error) as exc:
        aio(run_step(registry, "http", {"url": f"http://127.0.0.1:{closed_port()}/x"}, make_ctx()))
    assert exc.value.code == E_NETWORK and exc.value.retryable


def test_reset_mid_body_is_network(serve, registry, make_ctx, aio):
    async def reset(request):
        resp = web.StreamResponse(headers={"Content-Length": "100000", "Content-Type": "text/plain"})
        await resp.prepare(request)
        await resp.write(b"partial")
        request.transport.close()
        return resp
    base = serve(recording_app([], reset))
    with pytest.raises(A44Error) as exc:
        aio(run_step(registry, "http", {"url": base}, make_ctx()))
    assert exc.value.code == E_NETWORK


def test_slow_answer_is_step_timeout(serve, registry, make_ctx, aio):
    async def slow(request):
        await asyncio.sleep(1.0)
        return web.Response(text="late")
    base = serve(recording_app([], slow))
    t0 = time.monotonic()
    with pytest.raises(A44Error) as exc:
        aio(run_step(registry, "http", {"url": base}, make_ctx(timeout_s=0.2)))
    assert exc.value.code == E_STEP_TIMEOUT and exc.value.retryable
    assert time.monotonic() - t0 < 0.9
    with pytest.raises(A44Error) as exc:  # a deadline already past never sends
        aio(run_step(registry, "http", {"url": base}, make_ctx(timeout_s=-1)))
    assert exc.value.code == E_STEP_TIMEOUT


def test_declared_connector_path_headers_bearer_and_retry_on(serve, make_ctx, aio):
    seen = []

    async def handler(request):
        if request.path.endswith("/boom"):
            return web.Response(status=503, text="down")
        return web.json_response({"ok": True})
    base = serve(recording_app(seen, handler))
    reg = ConnectorRegistry({"con_api": {"id": "con_api", "type": "http", "baseUrl": base + "/v1/",
                                         "headers": {"X-Client": "a44"}, "retryOn": [500],
                                         "auth": {"kind": "bearer", "secretRef": "sec_api"}}})
    try:
        ctx = make_ctx(secrets={"sec_api": "s3cr3t-value"})
        result = aio(run_step(reg, {"uses": "con_api", "kind": "declared", "type": "http"},
                              {"method": "POST", "path": "/orders", "json": {"id": 1}}, ctx))
        assert result["json"] == {"ok": True}
        req = seen[0]
        assert req["path"] == "/v1/orders"
        assert req["headers"]["Authorization"] == "Bearer s3cr3t-value"
        assert req["headers"]["X-Client"] == "a44"
        # the declared retryOn (500 only) makes 503 permanent for this connector
        with pytest.raises(A44Error) as exc:
            aio(run_step(reg, "con_api", {"path": "boom"}, ctx))
        assert exc.value.code == "E_UPSTREAM_503" and exc.value.details["retryable"] is False
        assert "s3cr3t" not in str(exc.value) and "s3cr3t" not in json.dumps(exc.value.details)
    finally:
        aio(reg.aclose())


def test_unknown_auth_kind_is_refused_clearly(make_ctx, aio):
    reg = ConnectorRegistry({"con_o": {"id": "con_o", "type": "http", "baseUrl": "http://127.0.0.1:9",
                                       "auth": {"kind": "digest", "secretRef": "sec_o"}}})
    with pytest.raises(A44Error) as exc:
        aio(run_step(reg, "con_o", {"path": "/x"}, make_ctx()))
    assert exc.value.code == E_PARAMS_INVALID and not exc.value.retryable and "digest" in exc.value.message
    aio(reg.aclose())


def test_parameter_errors_are_permanent(registry, make_ctx, aio):
    for params, words in (({}, "needs `url`"), ({"path": "/x"}, "baseUrl"),
                          ({"url": "http://127.0.0.1:9", "json": {}, "body": "x"}, "not both"),
                          ({"url": "ftp://127.0.0.1/x"}, "http:// or https://"),
                          ({"url": "http://127.0.0.1:99999/"}, "invalid URL")):
        with pytest.raises(A44Error) as exc:
            aio(run_step(registry, "http", params, make_ctx()))
        assert exc.value.code == E_PARAMS_INVALID and words in exc.value.message


def test_one_session_per_registry_closed_by_aclose(serve, make_ctx, aio):
    base = serve(recording_app([]))
    reg = ConnectorRegistry()
    conn = reg.get("http")
    aio(run_step(reg, "http", {"url": base}, make_ctx()))
    session = conn._own.session
    aio(run_step(reg, "http", {"url": base}, make_ctx()))
    assert conn._own.session is session and not session.closed
    aio(reg.aclose())
    assert session.closed
