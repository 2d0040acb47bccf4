"""Bad path, query and header parameters are 400 E_BAD_REQUEST before anything reaches SQL; a 5xx never carries a
query name, a PostgreSQL message or the database's address (http/params.py, server.py)."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging

from aiohttp import web

from anthares44.automation.http.server import guard

from .support import P, bearer, request
from .test_api import token

BAD = [
    ("POST", "/v1/pj_default/%00"), ("POST", f"/v1/{P}/trg_%00hook"), ("POST", "/v1/pj_%FF/trg_hook"),
    ("GET", "/v1/automation/runs/run_%00x"), ("GET", "/v1/automation/runs/run_%00x/logs"),
    ("GET", "/v1/automation/events/evt_%00"), ("GET", "/v1/automation/runs?workflow=wf_%00"),
    ("GET", "/v1/automation/runs?step=%00"), ("GET", "/v1/automation/runs?state=%00"),
    ("GET", "/v1/automation/events?type=%00"), ("GET", "/v1/automation/events?type=" + "x" * 201),
    ("GET", "/v1/automation/runs?since=99999999d"), ("GET", "/v1/automation/runs?since=" + "9" * 400 + "d"),
    ("GET", "/v1/automation/runs?since=soon"), ("GET", "/v1/automation/runs?offset=99999999999999999999"),
    ("GET", "/v1/automation/runs?limit=-1"), ("GET", "/v1/automation/runs?limit=%D9%A1"),
    ("GET", "/v1/automation/events?offset=9223372036854775808"), ("GET", "/v1/automation/runs?limit=1&limit=2"),
    ("GET", "/v1/automation/runs/" + "r" * 201),
]


def test_bad_parameters_are_400_with_our_code(live, project):
    tok = token(live)
    before = live.counts()
    for method, path in BAD:   # before: 500 E_DB with PostgreSQL's message, or aiohttp's bare 500
        s, doc, _ = request(live.port, method, path, b"{}", bearer(tok))
        assert (s, doc["error"]["code"]) == (400, "E_BAD_REQUEST"), (method, path, doc)
        assert "SQLSTATE" not in doc["error"]["message"] and "failed" not in doc["error"]["message"]
    assert live.counts() == before


def test_sse_cursor_out_of_range_is_400_before_the_stream(live, project):
    tok = token(live)
    body = json.dumps({"workflow": "wf_hooked", "input": {}, "idempotency_key": "sse"}).encode()
    run_id = request(live.port, "POST", "/v1/automation/runs", body, bearer(tok))[1]["run_id"]
    logs = f"/v1/automation/runs/{run_id}/logs"
    cases = [(f"{logs}?follow=true", [("Last-Event-ID", "99999999999999999999999")]),
             (f"{logs}?follow=true", [("Last-Event-ID", "-5")]),
             (f"{logs}?follow=true", [("Last-Event-ID", "abc")]),
             (f"{logs}?follow=true&after=9223372036854775808", []),
             (logs, [("Accept", "text/event-stream"), ("Last-Event-ID", "1e3")]),
             (f"{logs}?follow=maybe", [])]
    for path, extra in cases:
        s, doc, headers = request(live.port, "GET", path, b"", bearer(tok) + extra, timeout=5)
        assert (s, doc["error"]["code"]) == (400, "E_BAD_REQUEST"), (path, extra, doc)
        assert headers["Content-Type"].startswith("application/json")


def test_a_good_cursor_still_streams(live, project):
    tok = token(live)
    body = json.dumps({"workflow": "wf_hooked", "input": {}, "idempotency_key": "sse-ok"}).encode()
    run_id = request(live.port, "POST", "/v1/automation/runs", body, bearer(tok))[1]["run_id"]
    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=5)
    conn.request("GET", f"/v1/automation/runs/{run_id}/logs?follow=true&after=0", headers=dict(bearer(tok)))
    resp = conn.getresponse()
    assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
    assert resp.readline().startswith(b"id: ")   # run.created
    conn.close()


def test_unknown_routes_and_methods_answer_in_our_shape(live):
    s, doc, _ = request(live.port, "GET", "/nope")
    assert (s, doc["error"]["code"]) == (404, "E_NOT_FOUND")
    s, doc, headers = request(live.port, "DELETE", "/v1/automation/runs/run_x", b"", bearer(token(live)))
    assert (s, doc["error"]["code"]) == (405, "E_METHOD_NOT_ALLOWED") and "GET" in headers["Allow"]


def test_a_database_failure_answers_without_its_detail(live, project):
    tok = token(live)
    live.run(live.store.close())   # every query now fails inside the store
    s, doc, headers = request(live.port, "GET", "/v1/automation/runs", b"", bearer(tok))
    assert s in (500, 503)
    message = doc["error"]["message"]
    cid = headers["A44-Correlation-Id"]
    assert cid in message and "127.0.0.1" not in message and "token_by_hash" not in message
    assert f"correlation_id={cid}" in live.log_text()


def test_the_last_resort_logs_a_line_and_answers_a_bare_500(caplog):
    async def boom(request):
        raise RuntimeError("select secret from automation.webhook_secrets failed: SQLSTATE 22021")

    async def main():
        app = web.Application(middlewares=[guard])
        app.router.add_get("/boom", boom)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            return await asyncio.to_thread(request, port, "GET", "/boom")
        finally:
            await runner.cleanup()

    with caplog.at_level(logging.ERROR, logger="a44.http"):
        s, doc, headers = asyncio.run(main())
    assert (s, doc["error"]["code"]) == (500, "E_INTERNAL")
    lines = [r for r in caplog.records if r.name == "a44.http"]
    assert len(lines) == 1 and headers["A44-Correlation-Id"] in lines[0].getMessage()
    assert "secret" not in doc["error"]["message"] and "SQLSTATE" not in doc["error"]["message"]
    assert headers["A44-Correlation-Id"] in doc["error"]["message"]
