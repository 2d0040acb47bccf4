"""`runs explain RUN` over REST and the CLI (§22, docs/flow.md "Why queued"): a run held back by a full per-tenant
key says which key, its use (`input.tenant=acme 1/1`), its oldest holder and its position; GET
/runs/{id}/explain and the local and remote CLI print the same document; an unknown run is 404."""

from __future__ import annotations

from anthares44.automation.cli.run_explain import render
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.engine import Engine
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.ingestion.support import P
from tests.partitions.support import compile_yaml

from .support import api, target  # noqa: F401 - the fixtures
from .test_parity import _same, both  # noqa: F401 - the fixture

YAML = """\
name: tenant-work
version: 1
concurrency:
  - {key: "input.tenant", limit: 1}
steps:
  - id: nap
    sleep: 1h
"""
HOLD = YAML.replace("{key: \"input.tenant\", limit: 1}", "{key: \"input.tenant\", limit: 1, holdWhileWaiting: true}")


async def _queued(store, ir) -> list[str]:
    await store.publish_version(P, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    runs = [(await store.create_run(P, ir.workflow_id, {"tenant": "acme"}, f"k{i}")).run_id for i in range(3)]
    eng = Engine(store, ConnectorRegistry(), worker_id="w1")
    for row in await eng.claim(16):         # the first holds acme's slot while it sleeps; the others wait
        await eng.drive_run(row)
    return runs


def test_explain_names_the_full_key_its_oldest_holder_and_the_position(api, both, tmp_path):
    ir = compile_yaml(tmp_path, HOLD)
    first, second, third = api.live.call(_queued, ir)
    s, doc = api("GET", f"/runs/{third}/explain")
    assert s == 200 and doc["held_back"] is True and doc["state"] == "pending"
    (lim,) = doc["limits"]
    assert lim["kind"] == "concurrency" and lim["use"] == "input.tenant=acme 1/1" and lim["full"] is True
    assert lim["oldest_holder"]["run_id"] == first and lim["position"] == 2 and lim["since"]
    shown = _same(both, "automation", "runs", "explain", third, drop=("at",))
    assert shown["limits"] == doc["limits"]
    text = render(shown)
    assert "concurrency input.tenant=acme 1/1  FULL" in text and f"oldest holder {first}" in text
    assert "position 2" in text and "held back" in text
    s, doc = api("GET", f"/runs/{first}/explain")
    assert s == 200 and doc["held_back"] is False      # the holder itself is not held back
    s, doc = api("GET", "/runs/run_01J00000000000000000000000/explain")
    assert s == 404 and doc["error"]["code"] == "E_RUN_NOT_FOUND"
