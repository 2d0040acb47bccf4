"""A parent and its child written in YAML, compiled by the real compiler, run by the engine and read back over
REST and the CLI (§21, docs/children.md "The tree"): `GET /v1/automation/runs/{id}/tree` from the root or the
child answers the whole lineage with states; `runs tree RUN` prints the same document locally and remotely, and
its text form indents the child under the parent's step; an unknown run is 404."""

from __future__ import annotations

from anthares44.automation.compiler.ir import WorkflowIR, to_json
from anthares44.automation.compiler.lint import lint_paths
from anthares44.automation.runtime.engine import Engine
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.cli_support import run_cli
from tests.ingestion.support import P
from tests.rest.support import api, target  # noqa: F401 - the fixtures
from tests.rest.test_parity import _same, both  # noqa: F401 - the fixture

PARENT = """name: signup
version: 1
steps:
  - id: onboard
    uses: workflow/tenant-onboard
    input: {name: "{{ input.name }}"}
    timeout: 2h
  - id: welcome
    uses: pass
    timeout: 5s
    output: "{{ steps.onboard.output.output.work }}"
"""
CHILD = """name: tenant-onboard
version: 4
steps:
  - id: work
    uses: pass
    timeout: 5s
    output: "hello {{ input.name }}"
"""


def _irs(tmp_path) -> list[WorkflowIR]:
    (tmp_path / "signup.yaml").write_text(PARENT)
    (tmp_path / "onboard.yaml").write_text(CHILD)
    res = lint_paths([str(tmp_path / "signup.yaml"), str(tmp_path / "onboard.yaml")], mode="publish", lower=True)
    assert not [d for d in res.diagnostics if d.severity.name == "ERROR"], res.diagnostics
    return [v for k, v in res.irs.items() if k.startswith("wf_")]


async def _ran(store, irs) -> str:
    for ir in irs:
        await store.publish_version(P, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    run_id = (await store.create_run(P, "wf_signup", {"name": "acme"}, "tree-1")).run_id
    await Engine(store, ConnectorRegistry(), worker_id="w1").drive()
    return run_id


def test_the_tree_over_rest_and_the_cli_from_the_root_or_the_child(api, both, tmp_path, capsys, target):
    run_id = api.live.call(_ran, _irs(tmp_path))
    s, doc = api("GET", f"/runs/{run_id}/tree")
    assert s == 200 and doc["root_run_id"] == run_id and not doc["truncated"]
    root, child = doc["runs"]
    assert (root["state"], root["depth"], root["parent_run_id"]) == ("succeeded", 0, None)
    assert (child["workflow_id"], child["version"], child["state"], child["parent_run_id"], child["step_id"]) == \
        ("wf_tenant_onboard", 4, "succeeded", run_id, "onboard")
    s, again = api("GET", f"/runs/{child['run_id']}/tree")
    assert s == 200 and again["runs"] == doc["runs"] and again["run_id"] == child["run_id"]
    s, run = api("GET", f"/runs/{run_id}")
    assert s == 200 and run["result"] == {"welcome": "hello acme"}      # the child's output, read by a later step
    shown = _same(both, "automation", "runs", "tree", run_id)
    assert [r["run_id"] for r in shown["runs"]] == [run_id, child["run_id"]]
    code, out, _ = run_cli(capsys, "automation", "runs", "tree", child["run_id"], *target("local"))
    assert code == 0 and out.splitlines() == [
        f"{run_id} wf_signup v1 succeeded", f"  onboard: {child['run_id']} wf_tenant_onboard v4 succeeded  <-"]
    s, doc = api("GET", "/runs/run_nope/tree")
    assert s == 404 and doc["error"]["code"] == "E_RUN_NOT_FOUND"
