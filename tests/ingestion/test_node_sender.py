"""The manual's Node.js sender, as written (only HOOK_URL, SECRET and the invoice change), against the live server."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from .support import P

SENDER = """
import { createHmac } from 'node:crypto';

const HOOK_URL = process.env.HOOK_URL;
const SECRET = process.env.SECRET;
const invoice = { id: 'inv_8812', status: 'paid', total: 249900 };

// a chave sai do recurso e da transicao de estado, nunca do relogio:
// e ela que faz o retry deste POST reencontrar o run original
const key = `invoice:${invoice.id}:${invoice.status}:v1`;
const body = JSON.stringify({ invoiceId: invoice.id, amountCents: invoice.total });
const ts = Math.floor(Date.now() / 1000).toString();

const res = await fetch(HOOK_URL, {
  method: 'POST',
  headers: {
    'content-type': 'application/json',
    'A44-Timestamp': ts,
    'A44-Idempotency-Key': key,
    'A44-Signature': createHmac('sha256', SECRET)
      .update(ts + '.' + body)     // mesma string que a ingestao recalcula
      .digest('hex'),
  },
  body,
});
console.log(JSON.stringify({ status: res.status, body: await res.json() }));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_manual_node_sender_is_accepted(live, project, tmp_path):
    script = tmp_path / "sender.mjs"
    script.write_text(SENDER)
    env = {"HOOK_URL": f"{live.url}/v1/{P}/trg_hook", "SECRET": project, "PATH": "/usr/bin:/usr/local/bin:/bin"}
    outs = [json.loads(subprocess.run(["node", str(script)], env=env, capture_output=True, text=True, timeout=30,
                                      check=True).stdout) for _ in range(2)]
    assert outs[0]["status"] == 202 and outs[1]["status"] == 200
    assert outs[0]["body"]["run_id"] == outs[1]["body"]["run_id"]
    run = live.run(live.store.get_run(outs[0]["body"]["run_id"]))
    assert run["input"] == {"invoiceId": "inv_8812", "amountCents": 249900}
    assert run["idempotency_key"] == "trg_hook:invoice:inv_8812:paid:v1"
