"""The proof list of the http connector against real servers on 127.0.0.1: slow responses (slow headers and
a slow body), resets mid-body from a raw socket server (clean close and RST), 429 with both Retry-After forms
through the engine, oversized bodies streamed without end, invalid JSON answers; and redaction of sensitive
response headers before anything is written."""

from __future__ import annotations

import asyncio
import email.utils
import json
import socket
import struct
import time
from datetime import timedelta

import asyncpg
import pytest
from aiohttp import web

from anthares44.automation.compiler.ir import ConnectorRef
from anthares44.automation.errors import E_NETWORK, E_STEP_TIMEOUT, A44Error
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.connectors.support import run_step
from tests.runtime.engine_support import node, publish_and_run, run_row, workflow

HTTP = ConnectorRef(uses="http", kind="builtin", type="http")


class RawServer:
    """A bare asyncio TCP server on 127.0.0.1 that answers every connection with `script(reader, writer)`: no HTTP
    library on the far side, so it can misbehave exactly (a Content-Length it never honours, an RST)."""

    def __init__(self, script):
        self.script = script
        self.server = None
        self.connections = 0

    async def start(self) -> str:
        async def handle(reader, writer):
            self.connections += 1
            await reader.readuntil(b"\r\n\r\n")          # the request head; these tests send no body
            await self.script(reader, writer)

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def close(self):
        self.server.close()
        await self.server.wait_closed()


def _head(ctype: str, length: int | None = None) -> bytes:
    lines = ["HTTP/1.1 200 OK", f"Content-Type: {ctype}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _raw_call(script, registry, ctx, **params):
    srv = RawServer(script)
    base = await srv.start()
    try:
        return await run_step(registry, "http", {"url": base + "/x", **params}, ctx)
    finally:
        await srv.close()


# -- resets mid-body ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["close", "rst"])
@pytest.mark.parametrize("ctype", ["application/json", "text/plain"])
def test_reset_mid_body_from_a_raw_server_is_network(registry, make_ctx, aio, how, ctype):
    async def script(reader, writer):
        writer.write(_head(ctype, 100_000) + b'{"partial": "' + b"x" * 500)
        await writer.drain()
        await asyncio.sleep(0.05)
        if how == "rst":       # SO_LINGER 0: the kernel sends RST instead of FIN
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort() if how == "rst" else writer.close()

    t0 = time.monotonic()
    with pytest.raises(A44Error) as exc:
        aio(_raw_call(script, registry, make_ctx(timeout_s=5)))
    assert exc.value.code == E_NETWORK and exc.value.retryable
    assert time.monotonic() - t0 < 2            # noticed at once, not at the deadline
    assert "127.0.0.1" in exc.value.message


def test_reset_before_any_byte_is_network(registry, make_ctx, aio):
    async def script(reader, writer):
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    with pytest.raises(A44Error) as exc:
        aio(_raw_call(script, registry, make_ctx()))
    assert exc.value.code == E_NETWORK and exc.value.retryable


# -- slow responses -------------------------------------------------------------------------------------------------
def test_slow_body_after_prompt_headers_is_step_timeout(registry, make_ctx, aio):
    """Headers arrive at once, then the body trickles: the deadline covers reading the body too."""
    async def script(reader, writer):
        writer.write(_head("text/plain", 10_000))
        await writer.drain()
        try:
            for _ in range(100):
                writer.write(b"x" * 10)
                await writer.drain()
                await asyncio.sleep(0.1)
        except ConnectionError:
            pass

    t0 = time.monotonic()
    with pytest.raises(A44Error) as exc:
        aio(_raw_call(script, registry, make_ctx(timeout_s=0.4)))
    assert exc.value.code == E_STEP_TIMEOUT and exc.value.retryable
    assert time.monotonic() - t0 < 1.5


def test_slow_but_within_the_deadline_succeeds(registry, make_ctx, aio):
    async def script(reader, writer):
        await asyncio.sleep(0.2)
        writer.write(_head("application/json", 12))
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.write(b'{"ok": true}')
        await writer.drain()
        writer.close()

    out = aio(_raw_call(script, registry, make_ctx(timeout_s=5)))
    assert out == {"status": 200, "headers": {"content-type": "application/json"}, "json": {"ok": True}}


# -- oversized bodies -----------------------------------------------------------------------------------------------
def test_an_endless_body_is_cut_at_the_cap_without_reading_it_all(serve, registry, make_ctx, aio):
    sent = {"bytes": 0, "finished": False}

    async def endless(request):
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})   # chunked, no length
        await resp.prepare(request)
        try:
            for _ in range(2_000):                 # up to 128 MB if nobody stops reading
                await resp.write(b"x" * 65_536)
                sent["bytes"] += 65_536
            sent["finished"] = True
        except (ConnectionError, RuntimeError):
            pass
        return resp

    app = web.Application()
    app.router.add_get("/big", endless)
    base = serve(app)
    t0 = time.monotonic()
    out = aio(run_step(registry, "http", {"url": base + "/big", "maxResponseBytes": 100_000}, make_ctx()))
    assert out["truncated"] is True and len(out["text"]) == 100_000 and "json" not in out
    assert "invalidJson" not in out               # cut on purpose: not a claim about the far side's JSON
    assert time.monotonic() - t0 < 5 and not sent["finished"]
    # the default cap is 1 MiB
    out = aio(run_step(registry, "http", {"url": base + "/big"}, make_ctx()))
    assert out["truncated"] is True and len(out["text"]) == 1_048_576


# -- invalid JSON answers -------------------------------------------------------------------------------------------
def test_invalid_json_with_a_json_content_type_is_text_and_flagged(serve, registry, make_ctx, aio):
    bodies = {"/bad": (200, b'{"a": 1,,}'), "/empty": (204, b""), "/good": (200, b'{"a": 1}'),
              "/bad502": (502, b"<html>bad gateway</html>"), "/latin": (200, b"\xff\xfe{")}

    async def answer(request):
        status, body = bodies[request.path]
        return web.Response(status=status, body=body, headers={"Content-Type": "application/json"})

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    base = serve(app)
    bad = aio(run_step(registry, "http", {"url": base + "/bad"}, make_ctx()))
    assert bad == {"status": 200, "headers": {"content-type": "application/json"}, "text": '{"a": 1,,}',
                   "invalidJson": True}
    latin = aio(run_step(registry, "http", {"url": base + "/latin"}, make_ctx()))
    assert latin["invalidJson"] is True and "json" not in latin
    empty = aio(run_step(registry, "http", {"url": base + "/empty"}, make_ctx()))
    assert empty["status"] == 204 and "invalidJson" not in empty
    good = aio(run_step(registry, "http", {"url": base + "/good"}, make_ctx()))
    assert good["json"] == {"a": 1} and "invalidJson" not in good
    with pytest.raises(A44Error) as exc:                     # an error status stays an error, with the text
        aio(run_step(registry, "http", {"url": base + "/bad502"}, make_ctx()))
    assert exc.value.code == "E_UPSTREAM_502" and exc.value.details["body"] == "<html>bad gateway</html>"


# -- 429 through the engine -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_429_retry_after_sets_when_the_engine_tries_again(serve, store, clock, aio, form):
    from anthares44.automation.runtime.engine import Engine

    hits = []

    async def limited(request):
        hits.append(time.time())
        if len(hits) == 1:
            if form == "seconds":
                after = "42"
            else:
                # an HTTP date is counted from the engine's clock (its `now`), not the machine's
                after = email.utils.format_datetime(clock.now() + timedelta(seconds=42), usegmt=True)
            return web.Response(status=429, text="slow down", headers={"Retry-After": after})
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/r", limited)
    base = serve(app)
    # the backoff alone would wait 1 s; Retry-After says 42 s
    step = node("call", params={"url": base + "/r"}, retry=(2, "fixed"), base_ms=1_000)
    run_id = aio(publish_and_run(store, workflow([step.model_copy(update={"connector": HTTP})], name="r429")))
    reg = ConnectorRegistry()
    try:
        eng = Engine(store, reg, clock=clock)
        aio(eng.drive())
        run = aio(run_row(store, run_id))
        assert run["state"] == "waiting" and len(hits) == 1
        wait = (run["next_wake_at"] - clock.now()).total_seconds()
        assert (41 <= wait <= 42) if form == "http-date" else wait == 42
        clock.advance(wait - 1)
        aio(eng.drive())
        assert len(hits) == 1                       # not before Retry-After
        clock.advance(1)
        aio(eng.drive())
        assert aio(run_row(store, run_id))["state"] == "succeeded" and len(hits) == 2
        codes = [(a["status"], a["error_code"]) for a in aio(store.list_attempts(run_id))]
        assert codes == [("failed", "E_UPSTREAM_429"), ("succeeded", None)]
    finally:
        aio(reg.aclose())


# -- redaction of response headers ----------------------------------------------------------------------------------
SENSITIVE = {"Set-Cookie": "session=sess-c00kie-val", "Authorization": "Bearer echoed-bearer-val",
             "X-Api-Key": "echoed-api-key-val", "Proxy-Authorization": "Basic proxy-auth-val",
             "X-Auth-Token": "auth-token-hdr-val"}


async def _dump(pg_url) -> str:
    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch("select t::text as r from automation.step_attempts t union all "
                                "select t::text from automation.runs t union all "
                                "select t::text from automation.run_events t")
        return "\n".join(r["r"] for r in rows)
    finally:
        await conn.close()


def test_sensitive_response_headers_never_reach_the_log(serve, store, clock, aio, pg_url):
    """The http connector captures content-type, etag, location and retry-after only: credentials a server sends
    back in headers are not captured, so not written (and on an error, details carry no headers at all)."""
    from anthares44.automation.runtime.engine import Engine

    async def leaky(request):
        status = 200 if request.path == "/ok" else 503
        return web.json_response({"fine": True}, status=status, headers={**SENSITIVE, "ETag": '"e1"'})

    app = web.Application()
    app.router.add_get("/{tail:.*}", leaky)
    base = serve(app)
    ok = node("ok", params={"url": base + "/ok"}).model_copy(update={"connector": HTTP})
    bad = node("bad", params={"url": base + "/bad"}).model_copy(update={"connector": HTTP})
    run_id = aio(publish_and_run(store, workflow([ok, bad], name="hdr")))
    reg = ConnectorRegistry()
    try:
        aio(Engine(store, reg, clock=clock).drive())
    finally:
        aio(reg.aclose())
    rows = {a["step_id"]: a for a in aio(store.list_attempts(run_id))}
    assert rows["ok"]["result"]["headers"] == {"content-type": "application/json; charset=utf-8", "etag": '"e1"'}
    assert rows["bad"]["error_code"] == "E_UPSTREAM_503"
    everything = aio(_dump(pg_url))
    for value in SENSITIVE.values():
        assert value not in everything


def test_captured_header_maps_are_redacted_by_the_engine_before_writing(store, clock, aio, pg_url):
    """Defence in depth: whatever a connector returns (a plugin that captures every header, say), the engine
    redacts sensitive keys, header spellings included, before the result is written."""
    from anthares44.automation.runtime.engine import Engine

    class AllHeaders:
        name = "allheaders"
        params_model = None

        async def invoke(self, params, ctx):
            return {"status": 200, "headers": {**SENSITIVE, "Content-Type": "text/plain"},
                    "raw": [["set-cookie", "kept-as-list-value"]]}

    step = node("grab").model_copy(update={"connector": ConnectorRef(uses="allheaders", kind="builtin", type=None)})
    run_id = aio(publish_and_run(store, workflow([step], name="allhdr")))
    reg = ConnectorRegistry()
    reg.register(AllHeaders())
    aio(Engine(store, reg, clock=clock).drive())
    row = aio(store.list_attempts(run_id))[0]
    assert row["result"]["headers"] == {"Set-Cookie": "[redacted]", "Authorization": "[redacted]",
                                        "X-Api-Key": "[redacted]", "Proxy-Authorization": "[redacted]",
                                        "X-Auth-Token": "[redacted]", "Content-Type": "text/plain"}
    everything = aio(_dump(pg_url))
    for value in SENSITIVE.values():
        assert value not in everything
    assert json.dumps("kept-as-list-value")[1:-1] in everything    # redaction is by key, not by value
