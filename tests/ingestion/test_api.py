"""REST API /v1/automation and its tokens (§17)."""

from __future__ import annotations

import json
from datetime import timedelta

from anthares44.automation.runtime.ingestion.tokens import create_token

from .support import P, bearer, request


def token(live, scopes=("automation:write",), expires=timedelta(days=30), cidrs=None, project=P):
    return live.call(create_token, project, "t", list(scopes), expires, cidrs).token


def test_openapi_is_public(live):
    s, doc, _ = request(live.port, "GET", "/v1/automation/openapi.json")
    assert s == 200 and doc["openapi"].startswith("3.") and "/v1/automation/events" in doc["paths"]
    assert "/v1/{project}/{trigger}" in doc["paths"]


def test_tokens_refuse_what_they_must(live, project):
    body = json.dumps({"workflow": "wf_hooked", "input": {}, "idempotency_key": "k1"}).encode()
    assert request(live.port, "POST", "/v1/automation/runs", body, [("Content-Type", "application/json")])[0] == 401
    assert request(live.port, "POST", "/v1/automation/runs", body, bearer("a44_pat_nope"))[0] == 401
    expired = token(live, expires=timedelta(seconds=-1))
    assert request(live.port, "GET", "/v1/automation/runs", b"", bearer(expired))[0] == 401
    read = token(live, scopes=("automation:read",))
    assert request(live.port, "GET", "/v1/automation/runs", b"", bearer(read))[0] == 200
    s, doc, _ = request(live.port, "POST", "/v1/automation/runs", body, bearer(read))
    assert s == 403 and doc["error"]["code"] == "E_FORBIDDEN"
    elsewhere = token(live, cidrs=["203.0.113.0/24"])
    assert request(live.port, "GET", "/v1/automation/runs", b"", bearer(elsewhere))[0] == 403
    here = token(live, cidrs=["127.0.0.0/8"])
    assert request(live.port, "GET", "/v1/automation/runs", b"", bearer(here))[0] == 200
    rows = live.run(live.store.fetch("tokens_list", project=P))
    assert rows and all("token" not in dict(r) for r in rows)   # only the sha256 is stored


def test_run_runs_logs_events_publish(live, project, tmp_path):
    tok = token(live)
    # publish through the API
    files = {"workflows/extra.yaml": "name: extra\nversion: 1\nsteps:\n  - id: only\n    uses: pass\n    timeout: 2s\n"}
    s, rep, _ = request(live.port, "POST", "/v1/automation/publish", json.dumps({"files": files}).encode(),
                        bearer(tok))
    assert s == 200 and rep["workflows"][0]["workflow_id"] == "wf_extra" and rep["ok"]
    # run: key mandatory
    no_key = json.dumps({"workflow": "wf_extra", "input": {"a": 1}}).encode()
    s, doc, _ = request(live.port, "POST", "/v1/automation/runs", no_key, bearer(tok))
    assert s == 400 and doc["error"]["code"] == "E_IDEMPOTENCY_KEY_REQUIRED"
    body = json.dumps({"workflow": "wf_extra", "input": {"a": 1}, "idempotency_key": "k-1"}).encode()
    s1, h1, _ = request(live.port, "POST", "/v1/automation/runs", body, bearer(tok))
    s2, h2, _ = request(live.port, "POST", "/v1/automation/runs", body, bearer(tok))
    assert (s1, s2) == (202, 200) and h1["run_id"] == h2["run_id"] and h1["created"] and not h2["created"]
    s, page, _ = request(live.port, "GET", "/v1/automation/runs?workflow=wf_extra", b"", bearer(tok))
    assert s == 200 and page["total"] == 1 and page["runs"][0]["run_id"] == h1["run_id"]
    s, logs, _ = request(live.port, "GET", f"/v1/automation/runs/{h1['run_id']}/logs", b"", bearer(tok))
    assert s == 200 and logs["run"]["run_id"] == h1["run_id"] and logs["attempts"] == []
    assert request(live.port, "GET", "/v1/automation/runs/run_nope", b"", bearer(tok))[0] == 404
    ev = json.dumps({"type": "billing.refund.requested", "data": {"amountCents": 900000, "currency": "BRL"},
                     "idempotency_key": "refund:api:1"}).encode()
    s1, e1, _ = request(live.port, "POST", "/v1/automation/events", ev, bearer(tok))
    s2, e2, _ = request(live.port, "POST", "/v1/automation/events", ev, bearer(tok))
    assert (s1, s2) == (202, 200) and e1["event_id"] == e2["event_id"]
    s, lst, _ = request(live.port, "GET", "/v1/automation/events", b"", bearer(tok))
    assert [e["event_id"] for e in lst["events"]] == [e1["event_id"]]
    s, one, _ = request(live.port, "GET", f"/v1/automation/events/{e1['event_id']}", b"", bearer(tok))
    assert one["envelope"]["data"]["currency"] == "BRL" and len(one["deliveries"]) == 3
    bad = request(live.port, "POST", "/v1/automation/events", b"{not json", bearer(tok))
    assert bad[0] == 400


def test_logs_follow_is_server_sent_events(live, project):
    import http.client
    import threading

    from tests.runtime.test_api import finish_run

    tok = token(live)
    body = json.dumps({"workflow": "wf_hooked", "idempotency_key": "sse"}).encode()
    run_id = request(live.port, "POST", "/v1/automation/runs", body, bearer(tok))[1]["run_id"]
    threading.Timer(0.3, lambda: live.run(finish_run(live.store, run_id, "succeeded"))).start()
    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=15)
    conn.request("GET", f"/v1/automation/runs/{run_id}/logs?follow=true", headers={"Authorization": f"Bearer {tok}"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/event-stream")
    text = resp.read().decode()
    assert "event: run.created" in text and "event: end" in text and text.index("run.created") < text.index("end")
