"""A W3C `traceparent` sent with a webhook, a REST run request or an event published on the bus becomes the parent of the run's trace (§16): the
run's span is its child, in its trace, and the run's attempts are children of the run's span. An invalid header is
ignored (the run gets its own trace); a deduplicated request keeps the first request's parent. The engine and the
HTTP plane are real, the spans go through the real SDK and OTLP exporter to a real receiver on 127.0.0.1."""

import json
from datetime import timedelta

import pytest

from anthares44.automation import tracing
from anthares44.automation.runtime.engine.worker import Engine
from anthares44.automation.runtime.ingestion.tokens import create_token
from tests.ingestion.support import P, bearer, request, signed_headers
from tests.observability.otlp_receiver import OtlpReceiver

HOOK = f"/v1/{P}/trg_hook"
PARENT_A = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
PARENT_B = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
PARENT_C = "00-11111111111111112222222222222222-3333333333333333-01"


@pytest.fixture
def receiver(monkeypatch):
    r = OtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    yield r
    r.close()


def _hook(live, secret, key, *extra):
    body = json.dumps({"n": key}).encode()
    s, doc, _ = request(live.port, "POST", HOOK, body, signed_headers(secret, body, key=key) + list(extra))
    assert s in (200, 202), doc
    return doc["run_id"]


def _drive(live, tracer):
    async def go():
        engine = Engine(live.store, tracer=tracer)
        await engine.drive()
        await engine.notifier.drain()
    live.run(go())
    tracer.flush()


def _spans_of(receiver, run_id):
    return [s for s in receiver.spans if s["attributes"].get("a44.run_id") == run_id]


def test_a_webhook_a_rest_run_and_an_event_join_the_callers_trace(live, project, receiver):
    tracer = tracing.from_environment()
    hooked = _hook(live, project, "inv-1", ("traceparent", PARENT_A), ("tracestate", "vendor=x"))
    again = _hook(live, project, "inv-1", ("traceparent", PARENT_B))          # deduplicated: same run, first parent
    invalid = _hook(live, project, "inv-2", ("traceparent", "00-" + "0" * 32 + "-00f067aa0ba902b7-01"))
    token = live.call(create_token, P, "t", ["automation:write"], timedelta(days=1), None).token
    body = json.dumps({"workflow": "wf_hooked", "idempotency_key": "rest-1"}).encode()
    s, doc, _ = request(live.port, "POST", "/v1/automation/runs", body, bearer(token) + [("traceparent", PARENT_B)])
    assert s == 202, doc
    rest = doc["run_id"]
    assert again == hooked
    event = json.dumps({"type": "billing.refund.requested", "data": {"amountCents": 1, "currency": "USD"},
                        "idempotency_key": "ev-1"}).encode()
    s, doc, _ = request(live.port, "POST", "/v1/automation/events", event, bearer(token) + [("traceparent", PARENT_C)])
    assert s in (200, 202), doc
    fanned = [d["run_id"] for d in doc["deliveries"] if d["outcome"] == "created"]
    assert len(fanned) == 2                               # trg_refund_all and trg_refund_kept
    _drive(live, tracer)
    receiver.wait_for(lambda s: sum(x["name"].startswith("run wf_") for x in s) == 5, 10, "five run spans")

    for run_id, parent in ((hooked, PARENT_A), (rest, PARENT_B), *((r, PARENT_C) for r in fanned)):
        _, trace_id, span_id, _ = parent.split("-")
        spans = _spans_of(receiver, run_id)
        assert {s["trace_id"] for s in spans} == {trace_id}
        (run,) = [s for s in spans if s["name"].startswith("run wf_")]
        assert run["parent"] == span_id and run["span_id"] == f"{tracing.run_span_id(run_id):016x}"
        (step,) = [s for s in spans if s["name"] == "step only"]
        assert step["parent"] == run["span_id"] and step["attributes"]["a44.step_id"] == "only"
        assert {s["name"] for s in spans} == {run["name"], "step only", "lease grant"}

    own = _spans_of(receiver, invalid)
    assert {s["trace_id"] for s in own} == {f"{tracing.run_trace_id(invalid):032x}"}
    assert [s["parent"] for s in own if s["name"] == "run wf_hooked"] == [None]
