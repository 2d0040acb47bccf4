"""End to end: a real `a44 automation serve` (subprocess, A44_ALERT_INTERVAL=1s), a workflow whose step a loopback
server answers 400 and a DLQ that grows, routed with `a44 monitor alert builtin` (the CLI, a subprocess). The
daemon is killed with -9 between the two halves and restarted; automation.notifications ends with exactly the
specified rows: no message lost, none doubled, a success resolving the failure alert."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

from aiohttp import web

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.queues import deliver_envelope
from anthares44.automation.runtime.store.core import Store
from tests.loopback import ThreadedServer
from tests.runtime.daemon_support import A44, ServeProcess, call, wait_until
from tests.runtime.engine_support import PROJECT, workflow
from tests.runtime.pg import query


class Upstream(ThreadedServer):
    """POST /settle answers 400 until `healthy` is set."""
    healthy = False

    def routes(self, app):
        app.router.add_post("/settle", self._settle)

    async def _settle(self, request):
        return web.json_response({"ok": self.healthy}, status=200 if self.healthy else 400)


async def _store_do(url, home, op):
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.migrate()
        await store.ensure_partitions()
        return await op(store)
    finally:
        await store.close()


def _rows(pg_url):
    return [(r[0], r[1], r[2], json.loads(r[3])) for r in query(
        pg_url, "select kind, channel, severity, payload, idempotency_key from automation.notifications order by id")]


def _by_rule(pg_url):
    out: dict[str, list] = {}
    for kind, channel, sev, p in _rows(pg_url):
        out.setdefault(p["rule"], []).append((kind, channel, sev, p["count"]))
    return out


def test_failed_runs_and_a_growing_dlq_through_a_crash(pg_url, tmp_path, monkeypatch):
    up = Upstream()
    ir = workflow([call("settle", "http", {"method": "POST", "url": f"{up.url}/settle"}, retries=0)],
                  name="invoice_settle")

    async def setup(store):
        await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        await store.fetchval("alert_channel_upsert", project=PROJECT, name="squad-billing", kind="webhook",
                             config=json.dumps({"url": "http://127.0.0.1:9/h", "secretRef": "sec_hook"}),
                             now=store.clock.now())
        for i in range(3):
            await store.create_run(PROJECT, ir.workflow_id, {}, f"bad-{i}", partition_key=f"inv-{i}")
        for i in range(2):
            await deliver_envelope(store, PROJECT, ir.workflow_id, b"not json %d" % i)

    asyncio.run(_store_do(pg_url, tmp_path, setup))
    env = {**os.environ, "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path)}
    routed = subprocess.run([A44, "monitor", "alert", "builtin", "--notify", "squad-billing", "--update-every", "2",
                             "--suppress-window", "1h"], env=env, capture_output=True, text=True, timeout=60)
    assert routed.returncode == 0, routed.stderr

    monkeypatch.setenv("A44_ALERT_INTERVAL", "1s")
    daemon = ServeProcess(pg_url, tmp_path, worker_id="a1")
    try:
        wait_until(lambda: _by_rule(pg_url).get("builtin:run_failed", []) == [
            ("firing", "squad-billing", "p2", 1), ("update", "squad-billing", "p2", 3)]
            and _by_rule(pg_url).get("builtin:dlq_growth") == [("firing", "squad-billing", "p2", 2)],
            60, "the first alerts")
        daemon.kill9()

        async def more(store):
            for i in range(2, 4):
                await deliver_envelope(store, PROJECT, ir.workflow_id, b"not json %d" % i)
        asyncio.run(_store_do(pg_url, tmp_path, more))
        daemon = ServeProcess(pg_url, tmp_path, worker_id="a2")
        wait_until(lambda: len(_by_rule(pg_url).get("builtin:dlq_growth", [])) == 2, 60, "the DLQ update")

        up.healthy = True
        asyncio.run(_store_do(pg_url, tmp_path, lambda s: s.create_run(PROJECT, ir.workflow_id, {}, "good")))
        wait_until(lambda: len(_by_rule(pg_url).get("builtin:run_failed", [])) == 3, 60, "the resolved message")
        assert daemon.term() == 0
    finally:
        daemon.stop()
        up.close()

    assert _by_rule(pg_url) == {
        "builtin:run_failed": [("firing", "squad-billing", "p2", 1), ("update", "squad-billing", "p2", 3),
                               ("resolved", "squad-billing", "p2", 3)],
        "builtin:dlq_growth": [("firing", "squad-billing", "p2", 2), ("update", "squad-billing", "p2", 4)]}
    rows = _rows(pg_url)
    failed = next(p for kind, _, _, p in rows if p["rule"] == "builtin:run_failed" and kind == "update")
    assert failed["workflow"] == "wf_invoice_settle" and failed["error_code"] == "E_UPSTREAM_400"
    assert sorted(failed["partitions_seen"]) == ["inv-0", "inv-1", "inv-2"] and failed["steps_seen"] == ["settle"]
    assert failed["next_action"].startswith("a44 automation replay run_")
    assert failed["next_action"].endswith(" --from-step settle --project pj_default")
    dlq = next(p for kind, _, _, p in rows if p["rule"] == "builtin:dlq_growth" and kind == "update")
    assert dlq["queue"] == "q_default" and dlq["dlq_depth"] == 4
    assert dlq["next_action"].startswith("a44 automation dlq redrive q_default --filter \"error_code == '")
    keys = query(pg_url, "select idempotency_key from automation.notifications")
    assert len({k[0] for k in keys}) == len(keys) == 5
