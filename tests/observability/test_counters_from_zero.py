"""A counter is exported at 0 before anything happened (issue 25 item 8): a project that published a workflow has
`automation_lease_reclaim_total{project=...} 0` in /metrics before its first run, so `rate()` / `increase()` (and an
alert rule on `automation.lease_reclaim_total`) see the series from its start instead of appearing mid-incident."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from anthares44.automation.app.metrics import collect
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.http.metrics import render_metrics
from anthares44.automation.runtime.alerts import sampler
from tests.runtime.engine_support import PROJECT, node, publish_and_run, workflow


def _reclaims(store, aio) -> dict:
    text = render_metrics(aio(collect(store, worker="w"))).decode()
    return {s.labels["project"]: s.value for f in text_string_to_metric_families(text)
            if f.name == "automation_lease_reclaim" for s in f.samples if s.name.endswith("_total")}


def test_lease_reclaims_are_exported_at_zero_before_the_first_run(store, aio, clock):
    assert _reclaims(store, aio) == {}                              # nothing published: no project to speak of
    ir = workflow([node("a")], name="quiet")
    aio(store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir)))
    assert _reclaims(store, aio) == {PROJECT: 0.0}                  # published, never run: 0, not absent
    series = aio(sampler.read_series(store, clock.now()))
    assert (PROJECT, "automation.lease_reclaim_total", {}, 0.0) in series    # what alert rules sample
    aio(publish_and_run(store, ir, key="k1"))
    assert _reclaims(store, aio) == {PROJECT: 0.0}
