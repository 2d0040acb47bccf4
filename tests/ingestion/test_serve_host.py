"""`serve --host` / `ingest --host`: the HTTP plane listens where it is told (127.0.0.2 is still loopback, so no
traffic leaves the machine), and a host other clients could reach is refused while `/metrics` trusts loopback
clients (app/serve.py, docs/api.md "Listening address")."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from anthares44.automation.app.serve import HttpLimits, HttpSettings, is_loopback_host
from anthares44.automation.errors import E_HTTP_HOST_UNSAFE, A44Error

A44 = str(Path(sys.executable).parent / "a44")
HOST = "127.0.0.2"


def _env(pg_url, tmp_path):
    return dict(os.environ, A44_DATABASE_URL=pg_url, A44_HOME=str(tmp_path / "home"))


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _health(host: str, port: int) -> int:
    conn = http.client.HTTPConnection(host, port, timeout=2)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    finally:
        conn.close()


def test_serve_listens_on_the_host_it_is_given(pg_url, tmp_path):
    port = _free_port(HOST)
    daemon = subprocess.Popen([A44, "automation", "serve", "--http-port", str(port), "--host", HOST],
                              env=_env(pg_url, tmp_path), stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):
            try:
                if _health(HOST, port) == 200:
                    break
            except OSError:
                time.sleep(0.1)
        assert _health(HOST, port) == 200
        with pytest.raises(ConnectionRefusedError):   # bound to 127.0.0.2 only, not to every loopback address
            _health("127.0.0.1", port)
    finally:
        daemon.terminate()
        _, err = daemon.communicate(timeout=30)
    assert daemon.returncode == 0 and "Traceback" not in err
    assert f"http listening on http://{HOST}:{port}" in err


@pytest.mark.parametrize("verb", ["serve", "ingest"])
def test_a_non_loopback_host_is_refused_unless_metrics_need_a_token(pg_url, tmp_path, verb):
    port = _free_port("127.0.0.1")
    done = subprocess.run([A44, "automation", verb, "--http-port", str(port), "--host", "0.0.0.0"],
                          env=_env(pg_url, tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    first, hint = done.stderr.splitlines()[:2]
    assert first.startswith("E_HTTP_HOST_UNSAFE --host 0.0.0.0 is not a loopback address")
    assert hint.startswith("hint: add --metrics-token-required")
    assert "Traceback" not in done.stderr


def test_which_hosts_count_as_loopback():
    assert all(is_loopback_host(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))
    assert not any(is_loopback_host(h) for h in ("0.0.0.0", "::", "", "10.0.0.1", "example.com", "::ffff:10.0.0.1"))
    for host in ("0.0.0.0", "::", "203.0.113.5"):
        with pytest.raises(A44Error) as exc:
            HttpSettings(host=host).check()
        assert exc.value.code == E_HTTP_HOST_UNSAFE
        HttpSettings(host=host, limits=HttpLimits(metrics_token_required=True)).check()   # allowed with a token
