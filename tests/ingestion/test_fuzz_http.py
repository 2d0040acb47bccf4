"""Random paths, methods, query strings, headers and bodies against the live server (hypothesis, raw sockets so
that any byte can be sent): never a 5xx, never a row written by a refused request, never a traceback (nor the
last-resort line) in the server's log."""

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anthares44.automation.http.params import QUERY

from .support import P, raw_request

FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))

ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=24)
segment = st.one_of(
    ANY_TEXT.map(lambda t: quote(t, safe="")),                          # percent-encoded, NUL and all
    ANY_TEXT.map(lambda t: t.replace("\r", "").replace("\n", "")),     # raw UTF-8 in the request line
    st.sampled_from(["run_01J00000000000000000000000", "evt_x", "trg_hook", P, "pj_default", "..", "%", "%zz",
                     "%FF%FE", "a" * 300]))
ROUTES = ["/v1/automation/runs", "/v1/automation/runs/{}", "/v1/automation/runs/{}/logs", "/v1/automation/events",
          "/v1/automation/events/{}", "/v1/automation/publish", "/v1/automation/whoami", "/v1/automation/{}",
          "/v1/automation/openapi.json", "/v1/{}/{}", f"/v1/{P}/{{}}", "/metrics", "/healthz", "/{}", "/{}/{}/{}"]
METHODS = st.one_of(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
                    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ-", min_size=1, max_size=10))
query = st.lists(st.tuples(st.one_of(st.sampled_from(sorted(QUERY)), ANY_TEXT), ANY_TEXT), max_size=4).map(
    lambda pairs: "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in pairs))
header_value = st.text(st.characters(min_codepoint=0, max_codepoint=255, exclude_characters="\r\n"), max_size=40)
HEADER_NAMES = ["Authorization", "Last-Event-ID", "A44-Project", "Content-Type", "Accept", "A44-Idempotency-Key",
                "A44-Signature", "A44-Timestamp", "Host", "Expect", "Cookie", "X-Forwarded-For"]
header_name = st.one_of(st.sampled_from(HEADER_NAMES), st.text("abcdefghijklmnopqrstuvwxyz-_0123456789",
                                                                min_size=1, max_size=20).map(lambda t: "X-" + t))
json_doc = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                        lambda c: st.lists(c, max_size=3) | st.dictionaries(
                            st.sampled_from(["workflow", "input", "idempotency_key", "type", "data", "files",
                                             "partition_key", "occurred_at"]) | st.text(max_size=6), c, max_size=4),
                        max_leaves=10)
body = st.one_of(st.binary(max_size=200), json_doc.map(lambda d: json.dumps(d).encode()))


@pytest.fixture(scope="module")
def fuzz_target(live_project):
    from anthares44.automation.runtime.ingestion.tokens import create_token

    live, _ = live_project
    tok = live.call(create_token, P, "fuzz", ["automation:write"], timedelta(days=1), None).token
    yield live, tok
    log = live.log_text()
    assert "Traceback" not in log and "E_INTERNAL" not in log, log[-4000:]


def _send(live, method: str, target: str, headers: list[tuple[str, str]], payload: bytes) -> int:
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
             f"Content-Length: {len(payload)}"] + [f"{n}: {v}" for n, v in headers]
    data = "\r\n".join(lines).encode("utf-8", "surrogatepass") + b"\r\n\r\n" + payload
    before = live.counts()
    status, answer = raw_request(live.port, data)
    assert 0 < status < 500, (status, data[:300], answer[:300])
    if status >= 400:
        # the one refusal that writes: an event envelope that cannot be deserialized is kept as a dead letter
        kept = b'"dead_letter_id"' in answer and b'"E_ENVELOPE_INVALID"' in answer
        expected = {**before, "dead_letters": before["dead_letters"] + 1} if kept else before
        assert live.counts() == expected, (status, data[:300])
    return status


def _auth(tok, with_token: bool) -> list[tuple[str, str]]:
    return [("Authorization", f"Bearer {tok}"), ("Content-Type", "application/json")] if with_token else []


@FUZZ
@given(route=st.sampled_from(ROUTES), segs=st.lists(segment, min_size=3, max_size=3), q=query, method=METHODS,
       with_token=st.booleans())
def test_random_paths_methods_and_queries(fuzz_target, route, segs, q, method, with_token):
    live, tok = fuzz_target
    target = route.format(*segs) + (f"?{q}" if q else "")
    _send(live, method, target, _auth(tok, with_token), b"")


@FUZZ
@given(route=st.sampled_from(ROUTES), seg=segment, method=st.sampled_from(["GET", "POST"]),
       headers=st.lists(st.tuples(header_name, header_value), max_size=6), with_token=st.booleans())
def test_random_headers(fuzz_target, route, seg, method, headers, with_token):
    live, tok = fuzz_target
    target = route.replace("{}", quote(seg, safe="") or "x")
    _send(live, method, target, _auth(tok, with_token) + [(n, v) for n, v in headers if n.lower() != "host"],
          b"{}" if method == "POST" else b"")


@FUZZ
@given(route=st.sampled_from(["/v1/automation/runs", "/v1/automation/events", "/v1/automation/publish",
                              f"/v1/{P}/trg_hook", "/v1/automation/runs/run_x"]),
       payload=body, ctype=st.sampled_from(["application/json", "text/plain", "application/json; charset=latin-1",
                                            ""]), with_token=st.booleans())
def test_random_bodies(fuzz_target, route, payload, ctype, with_token):
    live, tok = fuzz_target
    headers = [("Authorization", f"Bearer {tok}")] if with_token else []
    if ctype:
        headers.append(("Content-Type", ctype))
    _send(live, "POST", route, headers, payload)
