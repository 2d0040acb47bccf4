"""`await step.workflow("onboard", "tenant-onboard", input=...)` in a code workflow (§12, §21): the parent waits
holding no worker, its step's result is the child's output, a second visit creates no second child, a child that
fails fails the parent with E_CHILD_FAILED, and the child can be a YAML workflow or another code one."""

from __future__ import annotations

from anthares44.automation.app.automation import Automation
from tests.children.support import tree
from tests.runtime.engine_support import PROJECT, engine, run_row

CODE = '''from anthares44.automation import workflow, step


@workflow("signup-code", version=1)
async def signup(ctx, input):
    child = await step.workflow("onboard", "tenant-onboard", input={"name": input["name"]}, timeout="2h")
    return await step.run("welcome", fn=lambda: {"said": child["output"]["work"]})
'''
CHILD = """name: tenant-onboard
version: 2
steps:
  - id: nap
    sleep: 10m
  - id: work
    uses: pass
    timeout: 5s
    output: "hello {{ input.name }}"
"""


async def _publish(store, tmp_path, child: str = CHILD) -> None:
    (tmp_path / "signup_code.py").write_text(CODE)
    (tmp_path / "onboard.yaml").write_text(child)
    report = await Automation(store).publish([str(tmp_path / "onboard.yaml"), str(tmp_path / "signup_code.py")])
    assert report.ok, report


def test_a_code_parent_waits_for_its_child_and_gets_its_output(store, clock, aio, tmp_path):
    aio(_publish(store, tmp_path))
    run_id = aio(store.create_run(PROJECT, "wf_signup_code", {"name": "acme"}, "code-1")).run_id
    eng = engine(store, clock=clock)
    assert aio(eng.drive())[run_id] == "waiting"
    row = aio(run_row(store, run_id))
    assert row["lease_owner"] is None
    aio(eng.drive())        # a visit that finds the child still running creates no other
    clock.advance(600)
    aio(eng.drive())
    assert aio(run_row(store, run_id))["state"] == "succeeded"
    assert aio(run_row(store, run_id))["result"] == {"said": "hello acme"}
    nodes = aio(tree(store, run_id))
    assert [(r["depth"], r["workflow_id"], r["version"], r["state"]) for r in nodes] == [
        (0, "wf_signup_code", 1, "succeeded"), (1, "wf_tenant_onboard", 2, "succeeded")]


def test_a_code_parent_whose_child_fails_fails_with_E_CHILD_FAILED(store, clock, aio, tmp_path):
    aio(_publish(store, tmp_path, CHILD.replace('"hello {{ input.name }}"', '"{{ input.missing.deeper }}"')
                 .replace("  - id: nap\n    sleep: 10m\n", "")))
    run_id = aio(store.create_run(PROJECT, "wf_signup_code", {"name": "acme"}, "code-2")).run_id
    aio(engine(store, clock=clock).drive())
    row = aio(run_row(store, run_id))
    assert (row["state"], row["error_code"]) == ("failed", "E_CHILD_FAILED")
