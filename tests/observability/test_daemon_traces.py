"""Traces of a real `a44 automation serve` daemon exported over OTLP/HTTP to a real receiver on 127.0.0.1 (§16):
one span per attempt with the a44.* attributes, error code and status on the failed attempt, a lease-grant span
per visit that starts when the run was due, and one trace across a `kill -9` and the daemon that resumes the run."""

import asyncio
from collections import Counter

from aiohttp import web

from anthares44.automation import tracing
from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.store.core import Store
from tests.observability.otlp_receiver import OtlpReceiver
from tests.runtime.daemon_support import FarSide, ServeProcess, call
from tests.runtime.engine_support import workflow

PARTITION = "acct-7"


class FlakyFarSide(FarSide):
    """FarSide plus `POST /flaky/<name>`: 503 the first time, 200 after."""

    def routes(self, app):
        super().routes(app)
        app.router.add_post("/flaky/{name}", self._flaky)

    async def _flaky(self, request):
        self.hits[(request.path, request.headers.get("Idempotency-Key", ""))] += 1
        if self.count(request.path) == 1:
            return web.json_response({"busy": True}, status=503)
        return web.json_response({"ok": True})


async def _setup(url: str, ir, home) -> str:
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.migrate()
        await store.publish_version("pj_default", ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        return (await store.create_run("pj_default", ir.workflow_id, {}, "k-trace", partition_key=PARTITION)).run_id
    finally:
        await store.close()


async def _rows(url: str, sql: str, *args):
    store = await Store.connect(url, clock=SystemClock())
    try:
        async with store.connection("test") as conn:
            return await conn.fetch(sql, *args)
    finally:
        await store.close()


def _otel(receiver: OtlpReceiver) -> list[str]:
    return [f"OTEL_EXPORTER_OTLP_ENDPOINT={receiver.url}", "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=a44-test"]


def test_a_run_is_one_trace_with_a_span_per_attempt_across_a_kill_9(pg_url, tmp_path, monkeypatch):
    receiver, far = OtlpReceiver(), FlakyFarSide()
    for kv in _otel(receiver):
        monkeypatch.setenv(*kv.split("=", 1))
    ir = workflow([call("fetch", "http", {"method": "POST", "url": far.url("/flaky/fetch")}),
                   call("charge", "http", {"method": "POST", "url": far.url("/hold/charge")}),
                   call("done", "pass", {"output": "ok"})], name="traced")
    run_id = asyncio.run(_setup(pg_url, ir, tmp_path))
    first = ServeProcess(pg_url, tmp_path, worker_id="first")
    second = None
    try:
        assert far.held.wait(30), first.output()
        # the first daemon's spans are exported (50 ms batches) before it dies holding `charge`
        receiver.wait_for(lambda s: sum(x["name"] == "step fetch" for x in s) == 2, 10, "the two attempts of fetch")
        first.kill9()
        far.release()
        second = ServeProcess(pg_url, tmp_path, worker_id="second")
        receiver.wait_for(lambda s: any(x["name"] == "run wf_traced" for x in s), 30, "the run's span")
        assert second.term() == 0                          # graceful stop flushes what is still batched
    finally:
        for p in (first, second):
            if p is not None:
                p.stop()
        far.close()
        receiver.close()

    spans = receiver.spans
    trace_id = f"{tracing.run_trace_id(run_id):032x}"
    run_span = f"{tracing.run_span_id(run_id):016x}"
    assert {s["trace_id"] for s in spans} == {trace_id}, "one trace for the whole run, across both daemons"
    assert {s["service"] for s in spans} == {"a44-test"}

    attempts = [s for s in spans if s["name"].startswith("step ")]
    rows = asyncio.run(_rows(pg_url, "select step_id, attempt, status, error_code, retry_at from "
                                     "automation.step_attempts where run_id = $1", run_id))
    assert Counter((s["attributes"]["a44.step_id"], s["attributes"]["a44.attempt"]) for s in attempts) == \
        Counter((r["step_id"], r["attempt"]) for r in rows), "exactly one span per recorded attempt"
    for s in attempts:
        a = s["attributes"]
        assert s["parent"] == run_span
        assert a["a44.run_id"] == run_id and a["a44.workflow"] == "wf_traced" and a["a44.version"] == 1
        assert a["a44.queue"] == "q_default" and a["a44.partition_key"] == PARTITION
        assert s["end"] >= s["start"] > 0
    by = {(s["attributes"]["a44.step_id"], s["attributes"]["a44.attempt"]): s for s in attempts}
    failed = by[("fetch", 1)]
    assert failed["attributes"]["a44.status"] == "failed" and failed["attributes"]["a44.error_code"] == "E_UPSTREAM_503"
    assert failed["status"] == 2 and failed["message"].startswith("E_UPSTREAM_503")          # STATUS_CODE_ERROR
    assert by[("fetch", 2)]["status"] == 0 and "a44.error_code" not in by[("fetch", 2)]["attributes"]
    cut = by[("charge", 1)]                # interrupted by kill -9: its span comes from the daemon that took over
    assert cut["attributes"]["a44.status"] == "lease_expired" and cut["attributes"]["a44.worker"] == "second"
    assert by[("charge", 2)]["attributes"]["a44.worker"] == "second"

    grants = [s for s in spans if s["name"] == "lease grant"]
    assert len(grants) >= 3 and all(s["parent"] == run_span for s in grants)   # first visit, after the retry, takeover
    retry_at = next(r["retry_at"] for r in rows if (r["step_id"], r["attempt"]) == ("fetch", 1))
    after_retry = [g for g in grants if g["start"] == tracing.ns(retry_at)]
    assert len(after_retry) == 1, "the grant after the retry delay starts when the run was due"
    assert after_retry[0]["end"] >= after_retry[0]["start"]

    (run,) = [s for s in spans if s["name"] == "run wf_traced"]
    assert run["span_id"] == run_span and run["parent"] is None and run["status"] == 0
    assert run["attributes"]["a44.status"] == "succeeded"
