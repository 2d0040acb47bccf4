"""The CLI verbs: webhook secret|sign|send|rotate, events publish, auth token create|login, ingest."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from .support import P, request, write_project

A44 = str(Path(sys.executable).parent / "a44")


def a44(env, *args, check=True):
    p = subprocess.run([A44, *args], env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


def test_cli_end_to_end(pg_url, tmp_path):
    env = dict(os.environ, A44_DATABASE_URL=pg_url, A44_PROJECT=P, A44_HOME=str(tmp_path / "home"))
    out = a44(env, "automation", "publish", *write_project(tmp_path / "proj")).stdout
    assert "trg_hook (webhook trigger, standalone) created" in out
    secret = a44(env, "automation", "webhook", "secret", "trg_hook").stdout.strip()
    assert re.fullmatch(r"whsec_[0-9a-f]{64}", secret)
    again = a44(env, "automation", "webhook", "secret", "trg_hook", check=False)
    assert again.returncode == 1 and again.stderr.startswith("E_SECRET_ALREADY_SHOWN")
    payload = tmp_path / "payload.json"
    payload.write_text('{"order": "ord_991"}')
    signed = a44(env, "automation", "webhook", "sign", "--trigger", "trg_hook", "--file", str(payload)).stdout
    lines = signed.splitlines()
    assert lines[0].startswith("A44-Timestamp: ") and re.fullmatch(r"A44-Signature: [0-9a-f]{64}", lines[1])
    assert lines[2].startswith("A44-Idempotency-Key: (absent")
    # an ingestion-only server, then send twice through it
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ingest = subprocess.Popen([A44, "automation", "ingest", "--http-port", str(port)], env=env,
                              stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            try:
                if request(port, "GET", "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        sent = a44(env, "automation", "webhook", "send", "--trigger", "trg_hook", "--file", str(payload),
                   "--idempotency-key", "erp:ord_991:shipped:v1", "--repeat", "2",
                   "--url", f"http://127.0.0.1:{port}").stdout.splitlines()
        assert re.fullmatch(r"1/2  202 (run_\w+)   created", sent[0])
        run_id = sent[0].split()[2]
        assert re.fullmatch(rf"2/2  200 {run_id}   deduplicated \(key age \d+\.\ds\)", sent[1])
        a44(env, "automation", "webhook", "rotate", "trg_hook")
        # tokens and login
        tok = a44(env, "auth", "token", "create", "--name", "ci", "--scope", "automation:write", "--expires", "30d",
                  "--allow-cidr", "203.0.113.0/24").stdout.strip()
        assert tok.startswith("a44_pat_")
        assert request(port, "GET", "/v1/automation/runs", b"", [("Authorization", f"Bearer {tok}")])[0] == 403
        a44(env, "auth", "login", "--project", P, "--url", f"http://127.0.0.1:{port}")
        cred = Path(env["A44_HOME"]) / "credentials"
        assert stat.S_IMODE(cred.stat().st_mode) == 0o600
        stored = json.loads(cred.read_text())["projects"][P]["token"]
        assert request(port, "GET", "/v1/automation/runs", b"", [("Authorization", f"Bearer {stored}")])[0] == 200
    finally:
        ingest.terminate()
        ingest.wait(10)
    out = a44(env, "automation", "events", "publish", "--type", "billing.refund.requested", "--data",
              '{"amountCents": 900000, "currency": "BRL"}', "--idempotency-key", "refund:cli:1",
              "--partition-key", "cust_1").stdout
    assert re.match(r"evt_\w+  billing.refund.requested  created", out)
    assert "trg_refund_large  created run_" in out
    again = a44(env, "automation", "events", "publish", "--type", "billing.refund.requested", "--data", "{}",
                "--idempotency-key", "refund:cli:1").stdout
    assert "deduplicated (key age" in again
    missing = a44(env, "automation", "events", "publish", "--type", "x", "--data", "{}", check=False)
    assert missing.returncode == 2
