"""The child's trace continues its parent's (§21, §16): the child run's span is in the parent's trace, its parent
the parent run's span. Real engine and store, the real SDK exporting over OTLP/HTTP to a receiver on 127.0.0.1."""

from anthares44.automation import tracing
from tests.children.support import child_node, publish, tree
from tests.observability.otlp_receiver import OtlpReceiver
from tests.runtime.engine_support import PROJECT, Script, engine, node, workflow


def test_the_childs_run_span_sits_in_the_parents_trace_under_the_parents_run_span(store, clock, aio,
                                                                                   monkeypatch):
    receiver = OtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    tracer = tracing.from_environment()
    try:
        kid = workflow([node("work")], name="kid")
        parent = workflow([child_node("onboard", "wf_kid")], name="parent")
        aio(publish(store, parent, kid))
        run_id = aio(store.create_run(PROJECT, parent.workflow_id, {}, "trace-1")).run_id
        eng = engine(store, Script(), clock=clock)
        eng.tracer = tracer
        aio(eng.drive())
        tracer.flush()
        receiver.wait_for(lambda s: sum(1 for x in s if x["name"].startswith("run wf_")) >= 2, 10, "both runs")
    finally:
        tracer.shutdown()
        receiver.close()
    [_, child] = aio(tree(store, run_id))
    runs = {s["attributes"]["a44.run_id"]: s for s in receiver.spans if s["name"].startswith("run wf_")}
    mine, kids = runs[run_id], runs[child["run_id"]]
    assert kids["trace_id"] == mine["trace_id"] == f"{tracing.run_trace_id(run_id):032x}"
    assert kids["parent"] == mine["span_id"]
    work = [s for s in receiver.spans if s["name"] == "step work"]
    assert work and all(s["trace_id"] == mine["trace_id"] for s in work)
