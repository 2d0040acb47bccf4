"""Compensation attempts are spans too (§6.1, §16): `compensate <step>` with a44.attempt_kind = compensation, one
per attempt across the saga's durable waits (each wait a new visit, a new lease-grant span), ERROR on each failure,
and the run's span ends ERROR with E_COMPENSATION_FAILED when the budget is spent. Real engine and store, the
real SDK exporting over OTLP/HTTP to a receiver on 127.0.0.1."""

from anthares44.automation import tracing
from tests.observability.otlp_receiver import OtlpReceiver
from tests.runtime.engine_support import Script, attempts, engine, node, publish_and_run, workflow


def test_each_compensation_attempt_is_a_span_and_the_run_span_carries_the_outcome(store, clock, aio, monkeypatch):
    receiver = OtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    tracer = tracing.from_environment()
    try:
        run_id = aio(publish_and_run(store, workflow([node("c", compensate="undo"), node("d", retry=(3, "fixed"))],
                                                     name="saga")))
        eng = engine(store, Script(plan={"d": ["perm"]}), Script("undo", plan={"c": ["retry", "retry", "perm"]}),
                     clock=clock)
        eng.tracer = tracer
        for wait in (0, 5, 20, 60):
            clock.advance(wait)
            aio(eng.drive())
        tracer.flush()
        rows = aio(attempts(store, run_id))
        receiver.wait_for(lambda s: any(x["name"] == "run wf_saga" for x in s), 10, "the run's span")
    finally:
        tracer.shutdown()
        receiver.close()
    spans = [s for s in receiver.spans if s["attributes"]["a44.run_id"] == run_id]
    comp = sorted((s for s in spans if s["name"] == "compensate c"), key=lambda s: s["attributes"]["a44.attempt"])
    assert [(s["attributes"]["a44.attempt_kind"], s["attributes"]["a44.status"], s["status"]) for s in comp] == \
        [("compensation", "failed", 2), ("compensation", "failed", 2), ("compensation", "compensation_failed", 2)]
    assert len(comp) == sum(1 for r in rows if r[1] == "compensation")
    assert [s["attributes"]["a44.status"] for s in spans if s["name"] == "step d"] == ["failed"]
    assert len([s for s in spans if s["name"] == "lease grant"]) == 4      # the first visit and three waits
    (run,) = [s for s in spans if s["name"] == "run wf_saga"]
    assert run["status"] == 2 and run["attributes"]["a44.status"] == "compensation_failed"
    assert run["message"].startswith("E_COMPENSATION_FAILED")
    assert run["attributes"]["a44.error_code"] == "E_COMPENSATION_FAILED"
