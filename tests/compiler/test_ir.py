"""Lowering to IR (`compiler/lower.py`, `compiler/ir.py`, `compiler/graph.py`): the seed's invoice-settle workflow
with every default resolved, edges, the sha256 rule, JSON round trip, `a44 automation compile`, and `if:`
conditions compiled to programs that evaluate."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from anthares44.automation.compiler import ir as irmod
from anthares44.automation.compiler.lint import compile_sources, lint_paths
from anthares44.automation.compiler.source import load_text
from anthares44.automation.diagnostics import Severity
from tests.seed_texts import SEED_WORKFLOW as SEED  # noqa: E402  (the seed's workflow, as written)


@pytest.fixture(autouse=True)
def no_plugins(monkeypatch):
    """IR must not depend on what happens to be installed here: no connector plugins unless a test adds one."""
    from anthares44.automation.compiler.project import Project

    plugins: dict = {}
    monkeypatch.setattr(Project, "plugins", property(lambda self: plugins))
    return plugins


def lower(text: str, name: str = "workflow.yaml", mode: str = "lint"):
    """(IR documents by id, diagnostics) of one YAML text."""
    res = compile_sources([load_text(text, name)], mode, lower=True)
    return res.irs, res.diagnostics


def lower_one(text: str, name: str = "workflow.yaml"):
    irs, diags = lower(text, name)
    assert not [d for d in diags if d.severity is Severity.ERROR], diags
    [wf] = [v for v in irs.values() if isinstance(v, irmod.WorkflowIR)]
    return wf


def wf_text(steps: str, head: str = "name: shape\nversion: 1\n") -> str:
    return head + "steps:\n" + steps


# ---------------------------------------------------------------- the seed workflow
def test_seed_workflow_lowers_with_every_default_resolved():
    ir = lower_one(SEED, "invoice-settle.yaml")
    assert ir.ir_version == irmod.IR_VERSION == 1
    assert ir.kind == "workflow"
    assert ir.workflow_id == "wf_invoice_settle" and ir.name == "invoice-settle" and ir.version == 3
    assert ir.queue == "q_default"
    assert ir.lease_ms == 30_000
    assert ir.deadline_ms == 72 * 3600 * 1000
    assert ir.concurrency.max == 25
    assert ir.concurrency.partition_key == {"$tpl": "{{ input.invoiceId }}"}
    assert [n.id for n in ir.nodes] == ["reserve-funds", "mark-paid"]
    assert ir.edges == (("reserve-funds", "mark-paid"),)

    reserve, mark = ir.nodes
    assert (reserve.index, reserve.kind, reserve.timeout_ms, reserve.exclusive) == (0, "call", 15_000, False)
    assert reserve.connector.model_dump() == {"uses": "connector/payments.authorize", "kind": "unresolved",
                                              "config": None,
                                              "type": None}
    assert reserve.retry.model_dump() == {"max": 5, "strategy": "exponential-jitter", "base_ms": 1_000,
                                          "cap_ms": 300_000}
    comp = reserve.compensate
    assert comp.connector.uses == "connector/payments.void"
    assert (comp.attempts, comp.delays_ms) == (3, (5_000, 20_000, 60_000))
    assert comp.timeout_ms == 15_000 and comp.params == {}
    assert reserve.condition is None and reserve.sleep_ms is None and reserve.params == {}

    assert mark.connector.model_dump() == {"uses": "sql/execute", "kind": "builtin", "type": "sql/execute",
                                           "config": None}
    assert mark.timeout_ms == 5_000
    assert mark.retry.model_dump() == {"max": 0, "strategy": "none", "base_ms": 1_000, "cap_ms": 300_000}
    assert mark.compensate is None
    assert mark.params == {"query": "update invoices set status='paid' where id = $1"}   # SQL is never a $tpl

    [trig] = ir.triggers
    assert trig.model_dump() == {
        "id": "trg_invoice_settle_1", "type": "event", "workflow_id": "wf_invoice_settle",
        "event": "billing.invoice.finalized", "filter": None,
        "deliver": {"max_age_ms": None, "drop_on_filter_miss": True}, "partition_key": None, "cron": None,
        "tz": None, "dst_policy": None, "overlap": None, "catch_up": None, "input": None}
    assert ir.source == {"file": "invoice-settle.yaml", "format": "yaml"}


def test_seed_lints_with_warnings_only():
    """Unresolved plugins and `$1` without params are warnings: the seed still compiles in lint mode."""
    irs, diags = lower(SEED, "invoice-settle.yaml")
    assert sorted(d.code for d in diags) == ["A44211", "A44211", "A44501"]
    assert "wf_invoice_settle" in irs
    # publish mode refuses the unresolved plugins, so no IR
    irs, diags = lower(SEED, "invoice-settle.yaml", mode="publish")
    assert irs == {} and {d.code for d in diags if d.severity is Severity.ERROR} == {"A44211"}


def test_installed_plugin_resolves(no_plugins):
    class EntryPoint:
        def load(self):
            return object()          # a connector without a params model

    no_plugins.update({"payments.authorize": EntryPoint(), "payments.void": EntryPoint()})
    ir = lower_one(SEED)
    assert ir.nodes[0].connector.kind == "plugin"
    assert ir.nodes[0].compensate.connector.kind == "plugin"


# ---------------------------------------------------------------- defaults and node shapes
def test_defaults_without_concurrency_queue_or_timeout():
    ir = lower_one(wf_text("  - id: a\n    uses: pass\n    timeout: 1s\n"))
    assert ir.concurrency.model_dump() == {"max": irmod.DEFAULT_CONCURRENCY, "partition_key": None}
    assert ir.queue == irmod.DEFAULT_QUEUE and ir.triggers == () and ir.edges == ()
    assert ir.deadline_ms == irmod.RUN_DEADLINE_MS


def test_explicit_policies_are_kept():
    text = """name: shaped
version: 2
queue: q_payments
timeout: 2h
triggers:
  - {cron: "15 3 * * *", tz: America/Sao_Paulo}
  - {event: billing.refund.requested, filter: "data.amountCents > 500000", deliver: {maxAge: 1h}, id: trg_refund}
  - {webhook: true}
steps:
  - id: charge
    uses: http
    timeout: 10s
    url: "https://pay.example.test/{{ input.id }}"
    method: POST
    body: {amount: "{{ input.amount }}", currency: BRL, items: ["{{ input.first }}", 2]}
    retry: {max: 8, strategy: fixed, base: 250ms, cap: 20s}
    exclusive: true
    compensate: {uses: http, url: "https://pay.example.test/{{ input.id }}/void", method: POST, timeout: 30s}
  - id: cooldown
    sleep: 30s
"""
    queue = "- id: q_payments\n  maxConcurrency: 5\n"
    res = compile_sources([load_text(text, "w.yaml"), load_text(queue, "q.yaml")], lower=True)
    assert [d for d in res.diagnostics if d.severity is Severity.ERROR] == []
    ir = res.irs["wf_shaped"]
    assert ir.queue == "q_payments" and ir.deadline_ms == 2 * 3600 * 1000
    charge, cooldown = ir.nodes
    assert charge.retry.model_dump() == {"max": 8, "strategy": "fixed", "base_ms": 250, "cap_ms": 20_000}
    assert charge.exclusive is True
    assert charge.params == {
        "url": {"$tpl": "https://pay.example.test/{{ input.id }}"}, "method": "POST",
        "body": {"amount": {"$tpl": "{{ input.amount }}"}, "currency": "BRL",
                 "items": [{"$tpl": "{{ input.first }}"}, 2]}}
    assert charge.compensate.timeout_ms == 30_000
    assert charge.compensate.params == {"url": {"$tpl": "https://pay.example.test/{{ input.id }}/void"},
                                        "method": "POST"}
    assert charge.compensate.connector.kind == "builtin"
    assert (cooldown.kind, cooldown.sleep_ms, cooldown.connector, cooldown.timeout_ms) == ("sleep", 30_000, None,
                                                                                         None)
    sched, event, hook = ir.triggers
    assert (sched.id, sched.type, sched.cron, sched.tz) == ("trg_shaped_1", "schedule", "15 3 * * *",
                                                            "America/Sao_Paulo")
    assert (sched.dst_policy, sched.overlap, sched.deliver) == ("skip-nonexistent", "skip", None)
    assert (event.id, event.type, event.deliver.max_age_ms) == ("trg_refund", "event", 3_600_000)
    assert event.filter.cel == "data.amountCents > 500000"
    assert (hook.id, hook.type) == ("trg_shaped_3", "webhook")


def test_standalone_trigger_files_lower_too():
    trig = """- id: trg_nightly_reconcile
  type: schedule
  cron: "15 3 * * *"
  tz: America/Sao_Paulo
  workflow: wf_shape
  dstPolicy: run-twice
  overlap: queue
  catchUp: { enabled: true, maxOccurrences: 3, maxAge: 12h }
"""
    res = compile_sources([load_text(wf_text("  - id: a\n    uses: pass\n    timeout: 1s\n"), "w.yaml"),
                           load_text(trig, "t.yaml")], lower=True)
    t = res.irs["trg_nightly_reconcile"]
    assert isinstance(t, irmod.TriggerIR)
    assert (t.workflow_id, t.dst_policy, t.overlap) == ("wf_shape", "run-twice", "queue")
    assert t.catch_up.model_dump() == {"enabled": True, "max_occurrences": 3, "max_age_ms": 12 * 3600 * 1000}


def test_files_with_errors_produce_no_ir():
    irs, diags = lower(wf_text("  - id: a\n    uses: pass\n"))
    assert irs == {} and [d.code for d in diags] == ["A44201"]


# ---------------------------------------------------------------- edges
STEP = "  - id: {id}\n    uses: pass\n    timeout: 1s\n"


def steps(*specs):
    out = ""
    for spec in specs:
        sid, _, needs = spec.partition(":")
        out += STEP.format(id=sid)
        if _:
            out += f"    needs: [{needs}]\n"
    return wf_text(out)


@pytest.mark.parametrize("specs, edges", [
    (("a", "b", "c"), [("a", "b"), ("b", "c")]),                          # written order
    (("a", "b:", "c"), [("b", "c")]),                                     # needs: [] makes a root
    (("a", "b:a", "c:a", "d:b,c"), [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]),   # diamond
    (("a", "b", "c:a"), [("a", "b"), ("a", "c")]),                        # needs replaces the edge from b
    (("a", "b", "c:a", "d"), [("a", "b"), ("a", "c"), ("c", "d")]),       # d still follows c in order
])
def test_edges_from_order_and_needs(specs, edges):
    ir = lower_one(steps(*specs))
    assert sorted(ir.edges) == sorted(edges)


# ---------------------------------------------------------------- sha256
def _expected_sha(doc: dict) -> str:
    body = {k: v for k, v in doc.items() if k not in ("sha256", "source")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                          .encode("utf-8")).hexdigest()


def test_sha256_is_the_hash_of_the_canonical_json():
    ir = lower_one(SEED)
    doc = ir.model_dump(mode="json")
    assert len(ir.sha256) == 64 and ir.sha256 == _expected_sha(doc)


def test_sha256_is_stable_across_runs_file_moves_and_formatting(tmp_path):
    first = lower_one(SEED, "invoice-settle.yaml")
    assert lower_one(SEED, "invoice-settle.yaml").sha256 == first.sha256
    moved = lower_one(SEED, "elsewhere/renamed.yml")
    assert moved.sha256 == first.sha256 and moved.source["file"] == "elsewhere/renamed.yml"
    reformatted = ("# the same definition, written differently\n"
                   "version: 3\nname: invoice-settle\n"
                   "concurrency: {partitionKey: '{{ input.invoiceId }}', max: 25}\n"
                   "trigger: {event: billing.invoice.finalized}\n"
                   "steps:\n"
                   "- {id: reserve-funds, uses: connector/payments.authorize, timeout: 15000ms,\n"
                   "   retry: {strategy: exponential-jitter, max: 5}, compensate: connector/payments.void}\n"
                   "- id: mark-paid\n  timeout: 5s\n  uses: sql/execute\n"
                   "  query: update invoices set status='paid' where id = $1\n")
    assert lower_one(reformatted).sha256 == first.sha256


@pytest.mark.parametrize("old, new", [
    ("timeout: 5s", "timeout: 6s"),
    ("version: 3", "version: 4"),
    ("max: 5,", "max: 6,"),
    ("max: 25", "max: 26"),
    ("where id = $1", "where id = $1 and 1 = 1"),
    ("compensate: connector/payments.void", "compensate: connector/payments.refund"),
    ("event: billing.invoice.finalized", "event: billing.invoice.paid"),
])
def test_sha256_changes_when_the_definition_changes(old, new):
    assert old in SEED
    assert lower_one(SEED.replace(old, new, 1)).sha256 != lower_one(SEED).sha256


def test_sha256_changes_when_steps_are_reordered():
    a = lower_one(steps("a", "b"))
    b = lower_one(steps("b", "a"))
    assert a.sha256 != b.sha256


# ---------------------------------------------------------------- JSON round trip
def test_ir_json_round_trips():
    ir = lower_one(SEED.replace("    timeout: 5s\n", "    timeout: 5s\n    if: \"input.amount > 10\"\n"))
    text = json.dumps(ir.model_dump(mode="json"))
    back = irmod.load_workflow_ir(json.loads(text))
    assert back == ir
    assert irmod.seal(back).sha256 == ir.sha256
    assert back.node("mark-paid").condition.cel == "input.amount > 10"
    with pytest.raises(KeyError):
        back.node("nope")


def test_load_refuses_other_ir_versions_and_unknown_fields():
    doc = lower_one(SEED).model_dump(mode="json")
    with pytest.raises(ValueError, match="IR version"):
        irmod.load_workflow_ir({**doc, "ir_version": 2})
    with pytest.raises(ValueError):
        irmod.load_workflow_ir({**doc, "surprise": 1})


def test_ir_is_frozen():
    ir = lower_one(SEED)
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError, dataclasses FrozenInstanceError
        ir.version = 4  # type: ignore[misc]


# ---------------------------------------------------------------- conditions and filters
def test_if_compiles_to_a_serialisable_program_that_evaluates():
    from anthares44.automation.grammar import load_program

    text = wf_text("""  - id: fetch
    uses: http
    timeout: 5s
    url: https://example.test
  - id: notify
    uses: pass
    timeout: 1s
    if: "steps.fetch.output.status == 200 && input.amountCents > 500000"
""")
    ir = lower_one(text)
    cond = ir.node("notify").condition
    assert cond.cel == "steps.fetch.output.status == 200 && input.amountCents > 500000"
    program_ir = json.loads(json.dumps(cond.program))     # survives JSON
    prog = load_program(program_ir)
    ok = {"steps": {"fetch": {"output": {"status": 200}}}, "input": {"amountCents": 600000}}
    assert prog.evaluate(ok) is True
    assert prog.evaluate({**ok, "input": {"amountCents": 500000}}) is False
    assert prog.evaluate({**ok, "input": {"amountCents": 600000.0}}) is True   # JSON double, same answer
    assert prog.evaluate({**ok, "steps": {"fetch": {"output": {"status": 503}}}}) is False
    # the stored tree is what runs, not a re-parse of the text
    assert load_program({**program_ir, "cel": "false"}).evaluate(ok) is True


def test_trigger_filter_compiles_to_a_program():
    from anthares44.automation.grammar import load_program

    text = ("name: refunds\nversion: 1\n"
            "trigger: {event: billing.refund.requested, filter: \"data.amountCents > 500000 && "
            "data.currency == 'BRL'\"}\n"
            "steps:\n  - id: a\n    uses: pass\n    timeout: 1s\n")
    prog = load_program(lower_one(text).triggers[0].filter.program)
    assert prog.evaluate({"data": {"amountCents": 600000, "currency": "BRL"}}) is True
    assert prog.evaluate({"data": {"amountCents": 600000, "currency": "USD"}}) is False


# ---------------------------------------------------------------- the compile command
def _compile(args, cwd):
    from anthares44.automation.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["automation", "compile", *args])
    finally:
        os.chdir(old)
    return out.getvalue(), err.getvalue(), code


def test_compile_prints_the_ir_as_json(tmp_path):
    (tmp_path / "invoice-settle.yaml").write_text(SEED)
    out, err, code = _compile(["invoice-settle.yaml"], tmp_path)
    assert code == 0
    doc = json.loads(out)
    assert doc["workflow_id"] == "wf_invoice_settle" and doc["sha256"] == _expected_sha(doc)
    assert irmod.load_workflow_ir(doc) == lower_one(SEED, "invoice-settle.yaml")
    assert "A44211" in err and "A44501" in err           # warnings go to stderr, JSON stays clean
    out, _err, code = _compile(["--compact", "invoice-settle.yaml"], tmp_path)
    assert code == 0 and len(out.splitlines()) == 1 and json.loads(out)["sha256"] == doc["sha256"]


def test_compile_exits_1_on_errors_and_prints_no_json(tmp_path):
    (tmp_path / "bad.yaml").write_text(SEED.replace("    timeout: 5s\n", ""))
    out, err, code = _compile(["bad.yaml"], tmp_path)
    assert (out, code) == ("", 1)
    assert "bad.yaml:14:9: error A44201 step 'mark-paid' has no timeout" in err


def test_compile_publish_checks_refuse_unsettled_references(tmp_path):
    (tmp_path / "w.yaml").write_text(SEED)
    out, err, code = _compile(["--publish-checks", "w.yaml"], tmp_path)
    assert (out, code) == ("", 1) and "error A44211" in err


def test_compile_command_in_a_fresh_process_gives_the_same_hash(tmp_path, no_plugins):
    """A real process (other hash seed, nothing patched) prints the same IR as the in-process lowering,
    provided the machine has no payments plugin installed; otherwise only the connector kind differs."""
    (tmp_path / "invoice-settle.yaml").write_text(SEED)
    exe = Path(sys.executable).with_name("a44")
    cmd = [str(exe)] if exe.exists() else [shutil.which("a44") or sys.executable]
    if cmd == [sys.executable]:
        cmd += ["-m", "anthares44.automation.cli.main"]
    proc = subprocess.run([*cmd, "automation", "compile", "invoice-settle.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    from importlib.metadata import entry_points

    if not any(ep.name == "payments.authorize" for ep in entry_points(group="anthares44.automation.connectors")):
        assert doc["sha256"] == lower_one(SEED).sha256
    assert doc["sha256"] == _expected_sha(doc)


# ---------------------------------------------------------------- docs/ir.md
DOC = Path(__file__).resolve().parents[2] / "docs" / "ir.md"


def test_doc_example_is_what_compile_prints(tmp_path):
    """docs/ir.md shows the seed and its IR: both must be exactly what the compiler reads and prints."""
    text = DOC.read_text(encoding="utf-8")
    example = text[text.index("## Example"):]
    yaml_block = re.search(r"```yaml\n(.*?)```", example, re.DOTALL).group(1)
    json_block = re.search(r"```json\n(.*?)```", example, re.DOTALL).group(1)
    assert yaml_block == SEED
    (tmp_path / "invoice-settle.yaml").write_text(yaml_block)
    out, _err, code = _compile(["invoice-settle.yaml"], tmp_path)
    assert code == 0 and out == json_block


def test_doc_lists_every_ir_field():
    text = DOC.read_text(encoding="utf-8")
    for model in (irmod.WorkflowIR, irmod.NodeIR, irmod.TriggerIR):
        for name in model.model_fields:
            assert f"`{name}`" in text, f"docs/ir.md does not document {model.__name__}.{name}"
    for model in (irmod.RetryIR, irmod.CompensationIR, irmod.ConnectorRef, irmod.DeliverIR, irmod.CatchUpIR,
                  irmod.ConcurrencyIR, irmod.Expr):
        for name in model.model_fields:
            assert re.search(rf"\b{name}\b", text), f"docs/ir.md does not mention {model.__name__}.{name}"



def test_declared_connector_config_travels_in_the_ir(tmp_path):
    """The interpreter reads only IR: a `con_...` step carries its declaration, durations in ms."""
    (tmp_path / "con.yaml").write_text(
        "- id: con_erp\n  type: http\n  baseUrl: http://127.0.0.1:9\n  timeout: 20s\n"
        "  auth: {kind: bearer, secretRef: sec_erp}\n")
    (tmp_path / "wf.yaml").write_text(
        "name: erp-sync\nversion: 1\nsteps:\n  - id: push\n    uses: con_erp\n    timeout: 5s\n    path: /orders\n")
    result = lint_paths([str(tmp_path)], lower=True)
    assert [d.code for d in result.diagnostics] == []
    ref = result.irs["wf_erp_sync"].nodes[0].connector
    assert (ref.kind, ref.type) == ("declared", "http")
    assert ref.config == {"id": "con_erp", "type": "http", "baseUrl": "http://127.0.0.1:9", "timeout": 20000,
                          "auth": {"kind": "bearer", "secretRef": "sec_erp"}}
