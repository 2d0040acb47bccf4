"""`uses: workflow/NAME` in the compiler (§21): lowered into NodeIR.child (kind `child`, the child's version
pinned from the files, the input marked for rendering), and the call graph's refusals: an unknown target, a
cycle, a chain deeper than 8, keys a child step does not take (golden cases golden/A44270..A44274)."""

from __future__ import annotations

from anthares44.automation.compiler import ir as irmod
from anthares44.automation.compiler.lint import compile_sources
from anthares44.automation.compiler.source import load_text
from anthares44.automation.diagnostics import Severity

PARENT = """name: signup
version: 1
steps:
  - id: onboard
    uses: workflow/tenant-onboard
    input: {name: "{{ input.name }}"}
    wait: result
    timeout: 2h
    childOnTimeout: keep
    onParentCancel: abandon
    compensate: workflow/tenant-offboard
"""
CHILD = """name: tenant-onboard
version: 3
steps:
  - id: work
    uses: pass
    timeout: 5s
"""
OFF = CHILD.replace("tenant-onboard", "tenant-offboard").replace("version: 3", "version: 2")


def compiled(*texts: str, mode: str = "publish"):
    res = compile_sources([load_text(t, f"w{i}.yaml") for i, t in enumerate(texts)], mode, lower=True)
    errors = [d for d in res.diagnostics if d.severity is Severity.ERROR]
    irs = {v.name: v for v in res.irs.values() if isinstance(v, irmod.WorkflowIR)}
    return irs, errors, res.diagnostics


def chain(n: int) -> list[str]:
    """Workflows c0 -> c1 -> ... -> cn (n child calls), cn a leaf."""
    out = [f"name: c{i}\nversion: 1\nsteps:\n  - id: down\n    uses: workflow/c{i + 1}\n    timeout: 1h\n"
           for i in range(n)]
    return out + [f"name: c{n}\nversion: 1\nsteps:\n  - id: leaf\n    uses: pass\n    timeout: 5s\n"]


def test_a_child_step_lowers_to_a_child_node_with_its_version_pinned():
    irs, errors, _ = compiled(PARENT, CHILD, OFF)
    assert not errors, errors
    n = irs["signup"].nodes[0]
    assert (n.kind, n.connector, n.params) == ("child", None, {})
    assert n.child == irmod.ChildIR(workflow_id="wf_tenant_onboard", version=3,
                                    input={"name": {"$tpl": "{{ input.name }}"}}, wait="result",
                                    timeout_ms=7_200_000, on_timeout="keep", on_parent_cancel="abandon",
                                    compensate_workflow_id="wf_tenant_offboard", compensate_version=2)
    assert n.compensate is not None and n.compensate.connector.uses == "workflow/tenant-offboard"
    assert "child" not in irmod.to_json(irs["tenant-onboard"])["nodes"][0]     # absent elsewhere: hashes unchanged


def test_an_unknown_target_is_an_error_at_publish_and_a_warning_in_lint():
    _, errors, _ = compiled(PARENT.replace("compensate: workflow/tenant-offboard\n", ""))
    assert [d.code for d in errors] == ["A44270"]
    _, errors, diags = compiled(PARENT.replace("compensate: workflow/tenant-offboard\n", ""), mode="lint")
    assert not errors and [d.code for d in diags] == ["A44270"]


def test_a_cycle_is_refused_once_at_the_step_that_closes_it():
    a = "name: a\nversion: 1\nsteps:\n  - id: go\n    uses: workflow/b\n    timeout: 1h\n"
    b = "name: b\nversion: 1\nsteps:\n  - id: back\n    uses: workflow/a\n    timeout: 1h\n"
    _, errors, _ = compiled(a, b)
    assert [d.code for d in errors] == ["A44271"] and "wf_a -> wf_b -> wf_a" in errors[0].message
    self_call = "name: a\nversion: 1\nsteps:\n  - id: me\n    uses: workflow/a\n    timeout: 1h\n"
    assert [d.code for d in compiled(self_call)[1]] == ["A44271"]


def test_a_chain_of_8_is_taken_and_of_9_refused():
    assert not compiled(*chain(8))[1]
    _, errors, _ = compiled(*chain(9))
    assert [d.code for d in errors] == ["A44272"] and "chain of 9" in errors[0].message


def test_keys_a_child_step_does_not_take_are_refused():
    for extra, code in (("    retry: {max: 3}\n", "A44274"), ("    onParentCancel: later\n", "A44274"),
                        ("    inptu: {}\n", "A44274"), ("    input: [1]\n", "A44274")):
        text = PARENT.replace("    onParentCancel: abandon\n", "").replace("    timeout: 2h\n", "    timeout: 2h\n" + extra)
        if extra.startswith("    input:"):
            text = text.replace('    input: {name: "{{ input.name }}"}\n', "")
        _, errors, _ = compiled(text, CHILD, OFF)
        assert [d.code for d in errors] == [code], (extra, errors)
    _, errors, _ = compiled(PARENT.replace("    timeout: 2h\n", ""), CHILD, OFF)
    assert [d.code for d in errors] == ["A44201"]         # the step's timeout is required


def test_the_editor_schema_takes_a_child_step_and_closes_it():
    import json
    from pathlib import Path

    import jsonschema
    import yaml

    schema = json.loads((Path(__file__).parents[2] / "schemas" / "workflow.schema.json").read_text())
    v = jsonschema.Draft7Validator(schema)
    assert not list(v.iter_errors(yaml.safe_load(PARENT)))
    bad = yaml.safe_load(PARENT.replace("    wait: result\n", "    wait: result\n    retry: {max: 3}\n"))
    assert any("retry" in e.message for e in v.iter_errors(bad))
