"""`runs export` over REST (GET /v1/automation/histories, docs/testkit.md "Real runs as fixtures"): finished runs of
a workflow as histories redacted like results, the same documents from the local and the remote CLI; `--format
json` is one document, the default JSON lines; a missing workflow is a 400."""

from __future__ import annotations

import json

from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.engine import Engine
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.cli_support import run_cli
from tests.ingestion.support import P
from tests.partitions.support import compile_yaml

from .support import api, target  # noqa: F401 - the fixtures
from .test_parity import _same, both  # noqa: F401 - the fixture

YAML = """\
name: charge
version: 1
steps:
  - id: charge
    uses: pass
    timeout: 15s
    output: {charge: "ch_1", api_key: "sk_live_1"}
"""


async def _finished(store, ir, keys: list[str]) -> list[str]:
    await store.publish_version(P, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    runs = [(await store.create_run(P, ir.workflow_id, {"card": {"token": f"tok_{k}"}, "n": k}, k)).run_id
            for k in keys]
    await Engine(store, ConnectorRegistry(), worker_id="w1").drive()
    return runs


def test_histories_over_rest_are_redacted_and_the_cli_prints_the_same_locally_and_remotely(api, both, target,
                                                                                            capsys, tmp_path):
    ir = compile_yaml(tmp_path, YAML)
    runs = api.live.call(_finished, ir, ["a", "b"])
    s, doc = api("GET", "/histories?workflow=charge&since=1d&sample=10")
    assert s == 200 and sorted(h["run"]["run_id"] for h in doc["histories"]) == sorted(runs)
    for h in doc["histories"]:
        assert h["run"]["state"] == "succeeded" and h["run"]["input"]["card"] == {"token": "[redacted]"}
        (a,) = h["attempts"]
        assert (a["step_id"], a["status"]) == ("charge", "succeeded")
        assert "sk_live_1" not in json.dumps(h)
    s, one = api("GET", "/histories?workflow=charge&sample=1")
    assert s == 200 and len(one["histories"]) == 1
    s, err = api("GET", "/histories?sample=1")
    assert s == 400 and err["error"]["code"] in ("E_INVALID_ARGUMENT", "E_BAD_REQUEST")

    shown = _same(both, "automation", "runs", "export", "--workflow", "charge", "--sample", "10")
    assert sorted(h["run"]["run_id"] for h in shown["histories"]) == sorted(runs)
    code, out, err = run_cli(capsys, "automation", "runs", "export", "--workflow", "charge", *target("remote"))
    assert code == 0, err
    assert sorted(json.loads(line)["run"]["run_id"] for line in out.splitlines()) == sorted(runs)
