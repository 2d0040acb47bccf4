"""The HTTP plane never waits forever (http/limits.py), with raw sockets against a live server on
127.0.0.1: slowloris connections closed after the header timeout while normal requests are served, a short body
answered 408, a client hanging up mid-body one log line, connections past the cap refused with 503, event
streams ending when their client leaves or the server stops; and who may read /metrics."""

from __future__ import annotations

import json
import socket
import time

import pytest

from anthares44.automation.app.serve import HttpLimits, is_loopback

from .support import LiveServer, P, bearer, request, signed_headers
from .test_api import token


@pytest.fixture
def serve(pg_url, tmp_path):
    """serve(**limits) -> a LiveServer with those HttpLimits (closed at teardown)."""
    servers = []

    def start(**limits):
        servers.append(LiveServer(pg_url, results_dir=tmp_path / "results", limits=HttpLimits(**limits)))
        return servers[-1]
    yield start
    for server in servers:
        server.close()


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_500_slowloris_connections_are_closed_after_the_header_timeout(serve):
    live = serve(header_timeout=2.0)
    socks = []
    for _ in range(500):
        s = socket.create_connection(("127.0.0.1", live.port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        s.setblocking(False)
        socks.append(s)
    started, open_ = time.monotonic(), set(range(500))
    served_meanwhile = None
    try:
        while open_ and time.monotonic() - started < 12:      # unbounded before: aiohttp's default is 3630 s
            for i in list(open_):
                if _closed(socks[i]):
                    open_.discard(i)
                    continue
                try:
                    socks[i].send(b"X")                        # one more header byte, every second
                except OSError:
                    open_.discard(i)
            if served_meanwhile is None:
                served_meanwhile = request(live.port, "GET", "/healthz", timeout=5)[0]
            time.sleep(1)
        elapsed = time.monotonic() - started
    finally:
        for s in socks:
            s.close()
    assert served_meanwhile == 200
    assert not open_, f"{len(open_)} slowloris connections still open after {elapsed:.1f} s"
    assert elapsed < 12


def _partial(port: int, path: str, headers: list[tuple[str, str]], declared: int, sent: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {declared}\r\n"
    head += "".join(f"{n}: {v}\r\n" for n, v in headers if n.lower() != "content-length")
    sock.sendall(head.encode() + b"\r\n" + sent)
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict]:
    raw = b""
    while b"\r\n\r\n" not in raw or len(raw.partition(b"\r\n\r\n")[2]) < int(
            raw.lower().partition(b"content-length: ")[2].split(b"\r\n")[0] or 0):
        chunk = sock.recv(65536)
        if not chunk:
            break
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def test_a_body_shorter_than_its_content_length_is_a_408(serve, tmp_path):
    from anthares44.automation.app.publishing import publish
    from anthares44.automation.runtime.ingestion.triggers import current_secret

    from .support import write_project

    live = serve(body_timeout=1.0)
    assert live.call(publish, P, write_project(tmp_path / "proj")).ok
    secret = live.call(current_secret, P, "trg_hook")["secret"]
    body = b'{"a": 1}'
    cases = [(f"/v1/{P}/trg_hook", signed_headers(secret, body)),
             ("/v1/automation/runs", bearer(token(live)))]
    before = live.counts()
    for path, headers in cases:
        started = time.monotonic()
        sock = _partial(live.port, path, headers, 100, body)
        try:
            status, doc = _answer(sock)                      # before: no answer, ever
        finally:
            sock.close()
        assert (status, doc["error"]["code"]) == (408, "E_REQUEST_TIMEOUT")
        assert time.monotonic() - started < 6
    assert live.counts() == before
    assert "Traceback" not in live.log_text()


def test_a_client_hanging_up_mid_body_is_one_log_line(serve):
    live = serve()
    sock = _partial(live.port, "/v1/automation/events", bearer(token(live)), 1000, b'{"type": "x", ')
    time.sleep(0.3)
    sock.close()
    deadline = time.monotonic() + 5
    while "mid-body" not in live.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = [line for line in live.log_text().splitlines() if "mid-body" in line]
    assert len(lines) == 1 and "/v1/automation/events" in lines[0]
    assert "Traceback" not in live.log_text()


def test_connections_past_the_cap_get_a_503_and_are_closed(serve):
    live = serve(max_connections=5)
    idle = [socket.create_connection(("127.0.0.1", live.port), timeout=5) for _ in range(5)]
    try:
        deadline = time.monotonic() + 5
        while live.server.open_connections < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        extra = socket.create_connection(("127.0.0.1", live.port), timeout=5)
        with extra:
            status, doc = _answer(extra)
            assert (status, doc["error"]["code"]) == (503, "E_SERVER_BUSY")
            assert extra.recv(10) == b""                     # and closed
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if request(live.port, "GET", "/healthz", timeout=2)[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    else:
        pytest.fail("the server did not take connections again once the idle ones closed")


def _read_until(sock: socket.socket, marker: bytes) -> bool:
    seen = b""
    while marker not in seen:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        seen += chunk
    return True


def test_an_event_stream_ends_when_its_client_leaves_or_the_server_stops(serve, tmp_path):
    from anthares44.automation.app.publishing import publish

    from .support import write_project

    live = serve()
    assert live.call(publish, P, write_project(tmp_path / "proj")).ok
    tok = token(live)
    body = json.dumps({"workflow": "wf_hooked", "input": {}, "idempotency_key": "follow"}).encode()
    run_id = request(live.port, "POST", "/v1/automation/runs", body, bearer(tok))[1]["run_id"]  # never ends
    follow = (f"GET /v1/automation/runs/{run_id}/logs?follow=true HTTP/1.1\r\nHost: x\r\n"
              f"Authorization: Bearer {tok}\r\n\r\n").encode()
    leaving = socket.create_connection(("127.0.0.1", live.port), timeout=5)
    leaving.sendall(follow)
    assert _read_until(leaving, b"run.created")
    leaving.close()
    deadline = time.monotonic() + 5
    while live.server.open_connections and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live.server.open_connections == 0               # before: held until the run ends
    staying = socket.create_connection(("127.0.0.1", live.port), timeout=5)
    with staying:
        staying.sendall(follow)
        assert _read_until(staying, b"run.created")
        started = time.monotonic()
        live.run(live.server.stop())                       # before: aiohttp waited 60 s for the handler
        assert time.monotonic() - started < 5


def test_metrics_loopback_by_default_token_when_required(serve):
    open_ = serve()
    assert request(open_.port, "GET", "/metrics")[0] == 200     # from 127.0.0.1, no token
    guarded = serve(metrics_token_required=True)
    s, doc, headers = request(guarded.port, "GET", "/metrics")
    assert (s, doc["error"]["code"]) == (401, "E_TOKEN_INVALID") and "Bearer" in headers["WWW-Authenticate"]
    assert request(guarded.port, "GET", "/metrics", b"", bearer("a44_pat_nope"))[0] == 401
    read = token(guarded, scopes=("automation:read",))
    s, text, _ = request(guarded.port, "GET", "/metrics", b"", bearer(read))
    assert s == 200 and "api_rejected_total" in text
    elsewhere = token(guarded, scopes=("automation:read",), cidrs=["203.0.113.0/24"])
    assert request(guarded.port, "GET", "/metrics", b"", bearer(elsewhere))[0] == 403


def test_loopback_addresses():
    assert is_loopback("127.0.0.1") and is_loopback("127.8.9.10") and is_loopback("::1")
    assert not any(is_loopback(a) for a in ("203.0.113.5", "10.0.0.1", "::ffff:203.0.113.5", "", None, "x"))


def test_serve_flags_reach_the_http_plane(pg_url, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    a44 = str(Path(sys.executable).parent / "a44")
    env = dict(os.environ, A44_DATABASE_URL=pg_url, A44_HOME=str(tmp_path / "home"))
    bad = subprocess.run([a44, "automation", "serve", "--http-port", "1", "--http-body-timeout", "0s"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--http-body-timeout" in bad.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    daemon = subprocess.Popen([a44, "automation", "serve", "--http-port", str(port), "--http-header-timeout", "1s",
                               "--metrics-token-required"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            try:
                if request(port, "GET", "/healthz", timeout=2)[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        assert request(port, "GET", "/metrics")[0] == 401
        slow = socket.create_connection(("127.0.0.1", port), timeout=5)
        with slow:
            slow.sendall(b"GET /healthz HTTP/1.1\r\n")
            started = time.monotonic()
            assert slow.recv(10) == b""                        # closed by the 1 s header timeout
            assert time.monotonic() - started < 4.5
    finally:
        daemon.terminate()
        _, err = daemon.communicate(timeout=30)
    assert daemon.returncode == 0 and "Traceback" not in err
