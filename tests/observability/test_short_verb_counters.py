"""A short CLI verb that counts something (here `a44 automation events publish`, which counts published events
and filter misses) flushes its counters before it exits: a daemon's `/metrics` scraped afterwards shows the verb's
counts, though the verb's process is gone."""

from __future__ import annotations

import os
import subprocess

from prometheus_client.parser import text_string_to_metric_families

from tests.cli.test_runtime_verbs import A44
from tests.ingestion.support import LiveServer, P, request


def published_total(port: int, outcome: str) -> float:
    status, text, _ = request(port, "GET", "/metrics")
    assert status == 200
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.endswith("automation_events_published_total") and s.labels.get("outcome") == outcome \
                    and "worker" not in s.labels:
                return s.value
    return 0.0


def test_events_published_by_a_short_verb_show_in_metrics_afterwards(pg_url, tmp_path):
    live = LiveServer(pg_url, results_dir=tmp_path / "results")
    try:
        before = published_total(live.port, "created")
        env = {**os.environ, "A44_DATABASE_URL": pg_url, "A44_PROJECT": P, "A44_HOME": str(tmp_path / "home")}
        for key in ("k1", "k2", "k1"):        # two created, one deduplicated
            r = subprocess.run([A44, "automation", "events", "publish", "--type", "invoice.paid", "--data", "{}",
                                "--idempotency-key", key, "--local"], env=env, capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0, r.stderr
        assert published_total(live.port, "created") == before + 2
        assert published_total(live.port, "deduplicated") >= 1
    finally:
        live.close()
