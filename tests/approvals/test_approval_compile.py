"""`approval:` steps and `kind: approvers` groups in the compiler (§20, docs/approvals.md): lowered into
NodeIR.approval (kind `approval`, no connector, no step timeout); a group nobody declared is an error at publish
(A44260, a warning in lint: A44261) unless the project published it before; the editor schemas take both forms. The
other diagnostics are golden cases (golden/A44261..A44265)."""

from __future__ import annotations

from anthares44.automation.compiler import ir as irmod
from anthares44.automation.compiler.lint import compile_sources
from anthares44.automation.compiler.project import Known
from anthares44.automation.compiler.source import load_text
from anthares44.automation.diagnostics import Severity

GROUPS = """- kind: approvers
  name: finance-leads
  members: [alice, bob]
- kind: approvers
  name: cfo
  members: [dave]
"""
WORKFLOW = """name: refund
version: 1
steps:
  - id: cfo-approval
    approval:
      approvers: {groups: [finance-leads], min: 2}
      timeout: 72h
      remind: [48h, 24h]
      escalate: {after: 48h, to: {groups: [cfo]}}
      notify: squad-billing
  - id: pay
    uses: pass
    timeout: 5s
"""


def compiled(*texts: str, mode: str = "lint", known: Known | None = None):
    res = compile_sources([load_text(t, f"f{i}.yaml") for i, t in enumerate(texts)], mode, lower=True, known=known)
    return [v for v in res.irs.values() if isinstance(v, irmod.WorkflowIR)], res.diagnostics


def test_an_approval_step_lowers_to_an_approval_node():
    [ir], diags = compiled(WORKFLOW, GROUPS)
    assert [d for d in diags if d.severity is Severity.ERROR] == [] and diags == []
    n = ir.nodes[0]
    assert (n.kind, n.connector, n.timeout_ms) == ("approval", None, None)
    h = 3_600_000
    assert n.approval == irmod.ApprovalIR(groups=("finance-leads",), min=2, timeout_ms=72 * h,
                                          remind_ms=(24 * h, 48 * h), escalate_after_ms=48 * h,
                                          escalate_groups=("cfo",), on_timeout="reject", notify="squad-billing",
                                          allow_self=False)
    assert "approval" not in irmod.to_json(ir)["nodes"][1]      # absent elsewhere: hashes unchanged


def test_an_undeclared_group_is_a_publish_error_unless_the_project_published_it():
    _, lint = compiled(WORKFLOW)
    assert {d.code for d in lint} == {"A44261"} and all(d.severity is Severity.WARNING for d in lint)
    _, publish = compiled(WORKFLOW, mode="publish")
    assert [d.code for d in publish] == ["A44260", "A44260"] and all(d.severity is Severity.ERROR for d in publish)
    known = Known("published in project pj_x", approver_groups={"finance-leads": 3, "cfo": 1})
    _, published = compiled(WORKFLOW, mode="publish", known=known)
    assert published == []
    _, too_few = compiled(WORKFLOW, mode="publish", known=Known("x", approver_groups={"finance-leads": 1, "cfo": 1}))
    assert [d.code for d in too_few] == ["A44262"]


def test_the_editor_schemas_take_an_approval_step_and_an_approvers_file():
    import jsonschema
    import yaml

    from anthares44.automation.compiler.jsonschema import generate

    workflow = generate("workflow")
    doc = yaml.safe_load(WORKFLOW)
    jsonschema.validate(doc, workflow)
    doc["steps"][0]["retry"] = {"max": 2}
    assert list(jsonschema.Draft7Validator(workflow).iter_errors(doc))
    jsonschema.validate(yaml.safe_load(GROUPS), generate("approvers"))
    jsonschema.validate(yaml.safe_load(GROUPS), generate("any"))
    assert list(jsonschema.Draft7Validator(generate("approvers")).iter_errors([{"kind": "approvers", "name": "x"}]))
