"""What people see of buffers (§22): `flow buffers` lists the open ones with when and why each will start its
run, `runs show` of a started run lists the events it carries, and the metrics count events buffered and flushes
by reason."""

from __future__ import annotations

from anthares44.automation.app.flow import Flow
from anthares44.automation.app.metrics import as_rows, collect
from anthares44.automation.cli.cmd_runs import carried_text

from .support import batch_wf, debounce_wf, send


def test_open_buffers_the_carried_events_of_a_run_and_the_metrics(a44_env):
    env = a44_env
    env.publish(debounce_wf(quiet="2s", max_wait="1m", deliver="all"), batch_wf(max_size=2, max_wait="5s"))
    e1 = send(env, "doc.changed", {"docId": "d1"}, "k1")
    env.advance("1s")
    e2 = send(env, "doc.changed", {"docId": "d1"}, "k2")
    send(env, "order.placed", {"tenantId": "acme"}, "o1")
    send(env, "order.placed", {"tenantId": "acme"}, "o2")          # fills the batch: maxSize
    send(env, "order.placed", {"tenantId": "acme"}, "o3")
    bufs = env.call(Flow(env.app).buffers())
    assert [(b["workflow_id"], b["kind"], b["key"], b["events"], b["due_for"]) for b in bufs] == [
        ("wf_doc_sync", "debounce", "d1", 2, "quiet"), ("wf_tenant_batch", "batch", "acme", 1, "maxWait")]
    assert env.call(Flow(env.app).buffers("doc-sync"))[0]["due_at"] == bufs[0]["due_at"]
    env.advance("2s")
    (run,) = [r for r in env.runs("doc-sync")]
    doc = env.call(env.app.get_run(run.id))
    c = doc["carried"]
    assert (c["kind"], c["key"], c["reason"], c["count"]) == ("debounce", "d1", "quiet", 2)
    assert [e["event_id"] for e in c["events"]] == [e1.event_id, e2.event_id]
    text = carried_text(doc)
    assert "carries 2 events of debounce buffer" in text and e2.event_id in text
    plain = env.runs("tenant-batch")[0]
    assert env.call(env.app.get_run(plain.id))["carried"]["reason"] == "maxSize"

    samples = {(r["name"], tuple(sorted(r["labels"].items()))): r["value"]
               for r in as_rows(env.call(collect(env.store)))}
    doc_labels = (("project", env.project), ("workflow", "wf_doc_sync"))
    batch_labels = (("project", env.project), ("workflow", "wf_tenant_batch"))
    assert samples[("automation_flow_events_buffered_total", doc_labels)] == 2
    assert samples[("automation_flow_buffered_events", batch_labels)] == 1
    def flushes(labels, reason):
        return samples[("automation_flow_buffer_flushes_total", tuple(sorted((*labels, ("reason", reason)))))]
    assert flushes(doc_labels, "quiet") == 1 and flushes(doc_labels, "maxWait") == 0
    assert flushes(batch_labels, "maxSize") == 1
