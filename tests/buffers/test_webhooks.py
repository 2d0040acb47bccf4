"""A webhook of a batched workflow (§9 + §22) against a live server on 127.0.0.1: requests join their key's
batch instead of starting a run each; the request that fills a batch starts its run; a repeat of a buffered
request buffers nothing and names the batch (and its run once started); a body whose key cannot be computed is a
dead letter answered 422 E_FLOW_KEY_INVALID."""

from __future__ import annotations

import json

import pytest

from anthares44.automation.app.publishing import publish
from anthares44.automation.runtime.ingestion.triggers import current_secret
from tests.ingestion.support import LiveServer, P, request, signed_headers

FLOW = """\
name: hook-batch
version: 1
trigger:
  id: trg_hook_batch
  webhook: true
batch: {key: "input.tenantId", maxSize: 2, maxWait: 1h}
steps:
  - id: only
    uses: pass
    timeout: 2s
"""
PATH = f"/v1/{P}/trg_hook_batch"


@pytest.fixture
def live(pg_url, tmp_path):
    server = LiveServer(pg_url, results_dir=tmp_path / "results")
    yield server
    server.close()


def _rows(live, sql: str):
    async def go(store):
        async with store.pool.acquire() as conn:
            return [dict(r) for r in await conn.fetch(sql)]
    return live.call(go)


def test_webhooks_join_the_batch_the_filling_request_starts_the_run_a_repeat_buffers_nothing(live, tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "wf.yaml").write_text(FLOW)
    assert live.call(publish, P, [str(tmp_path / "p")]).ok
    secret = live.call(current_secret, P, "trg_hook_batch")["secret"]

    def post(data: dict, key: str):
        body = json.dumps(data).encode()
        return request(live.port, "POST", PATH, body, signed_headers(secret, body, key=key))

    s1, d1, _ = post({"tenantId": "acme", "n": 1}, "k1")
    assert s1 == 202 and d1["run_id"] is None and d1["buffer_id"].startswith("fb_")
    s1b, d1b, _ = post({"tenantId": "acme", "n": 1}, "k1")            # a repeat while buffered
    assert s1b == 200 and d1b == {"run_id": None, "buffer_id": d1["buffer_id"]}
    s2, d2, _ = post({"tenantId": "acme", "n": 2}, "k2")              # fills the batch of 2: its run starts
    assert s2 == 202 and d2["run_id"].startswith("run_") and d2["buffer_id"] == d1["buffer_id"]
    s1c, d1c, _ = post({"tenantId": "acme", "n": 1}, "k1")            # a repeat after the flush names the run
    assert s1c == 200 and d1c["run_id"] == d2["run_id"]
    s3, d3, _ = post({"n": 3}, "k3")                                   # no tenantId: the key fails
    assert s3 == 422 and d3["error"]["code"] == "E_FLOW_KEY_INVALID" and "dlq_" in d3["error"]["message"]

    runs = _rows(live, "select run_id, input from automation.runs where workflow_id = 'wf_hook_batch'")
    assert len(runs) == 1 and runs[0]["run_id"] == d2["run_id"]
    got = runs[0]["input"]
    carried = (json.loads(got) if isinstance(got, str) else got)["events"]
    assert [e["data"]["n"] for e in carried] == [1, 2] and carried[0]["idempotency_key"] == "k1"
    letters = _rows(live, "select error_code from automation.dead_letters")
    assert [r["error_code"] for r in letters] == ["E_FLOW_KEY_INVALID"]
    assert _rows(live, "select count(*) as n from automation.flow_buffer_events")[0]["n"] == 2
