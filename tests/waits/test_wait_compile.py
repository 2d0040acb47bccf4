"""`wait: {signal, timeout, onTimeout}` in the compiler (§20): lowered into NodeIR.wait (kind `wait`, no connector,
no step timeout), required fields refused by the model, and the editor schema takes the form. The diagnostics of
the form are golden cases (golden/A44217, golden/A44214/A44214_wait_past_max_duration)."""

from __future__ import annotations

from anthares44.automation.compiler import ir as irmod
from anthares44.automation.compiler.lint import compile_sources
from anthares44.automation.compiler.source import load_text
from anthares44.automation.diagnostics import Severity

TEXT = """name: gate
version: 1
steps:
  - id: ask
    uses: pass
    timeout: 5s
  - id: approval
    wait: {signal: approved, timeout: 2d, onTimeout: continue}
  - id: after
    uses: pass
    timeout: 5s
"""


def compiled(text: str):
    res = compile_sources([load_text(text, "w.yaml")], "lint", lower=True)
    errors = [d for d in res.diagnostics if d.severity is Severity.ERROR]
    return [v for v in res.irs.values() if isinstance(v, irmod.WorkflowIR)], errors


def test_a_wait_step_lowers_to_a_wait_node():
    [ir], errors = compiled(TEXT)
    assert not errors
    n = ir.nodes[1]
    assert (n.kind, n.connector, n.timeout_ms) == ("wait", None, None)
    assert n.wait == irmod.WaitIR(kind="signal", signal="approved", timeout_ms=2 * 86_400_000, on_timeout="continue")
    assert irmod.to_json(ir)["nodes"][1]["wait"]["on_timeout"] == "continue"
    assert "wait" not in irmod.to_json(ir)["nodes"][0]     # absent elsewhere: hashes unchanged


def test_the_model_refuses_a_wait_without_timeout_or_with_a_bad_name():
    for block in ("{signal: approved}", "{signal: Approved, timeout: 1h}", "{timeout: 1h}",
                  "{signal: approved, timeout: 1h, onTimeout: retry}"):
        _, errors = compiled(TEXT.replace("{signal: approved, timeout: 2d, onTimeout: continue}", block))
        assert errors, block


def test_the_editor_schema_takes_a_wait_step_and_closes_it():
    import jsonschema

    from anthares44.automation.compiler.jsonschema import generate

    schema = generate("workflow")
    doc = {"name": "gate", "version": 1, "steps": [{"id": "approval", "wait": {"signal": "ok", "timeout": "1h"}}]}
    jsonschema.validate(doc, schema)
    doc["steps"][0]["retry"] = {"max": 2}
    assert list(jsonschema.Draft7Validator(schema).iter_errors(doc))


EVENT = """name: pay
version: 1
steps:
  - id: await-payment
    wait:
      event: billing.payment.received
      correlate: {run: "input.invoiceId", event: "data.invoiceId"}
      if: "event.data.amountCents >= input.amountCents"
      since: -15m
      timeout: 2d
"""


def test_an_event_wait_lowers_with_its_cel_and_its_lookback():
    [ir], errors = compiled(EVENT)
    assert not errors
    w = ir.nodes[0].wait
    assert (w.kind, w.event, w.since, w.lookback_ms, w.on_timeout) == ("event", "billing.payment.received",
                                                                        "lookback", 900_000, "fail")
    assert (w.correlate_run.cel, w.correlate_event.cel) == ("input.invoiceId", "data.invoiceId")
    assert w.condition.cel.startswith("event.data.amountCents")
    assert "signal" not in irmod.to_json(ir)["nodes"][0]["wait"]


def test_an_event_wait_defaults_to_run_start_and_a_broadcast_has_no_programs():
    [ir], errors = compiled(EVENT.replace("      since: -15m\n", "").replace(
        '{run: "input.invoiceId", event: "data.invoiceId"}', "none").replace(
        '      if: "event.data.amountCents >= input.amountCents"\n', ""))
    assert not errors
    w = ir.nodes[0].wait
    assert (w.since, w.lookback_ms, w.correlate_run, w.correlate_event, w.condition) == ("run_start", None, None,
                                                                                         None, None)


def test_bad_cel_in_an_event_wait_is_a_publish_error():
    for bad in ('run: "inpt.invoiceId"', 'event: "data.invoiceId +"'):
        key = bad.split(":")[0]
        text = EVENT.replace(f'{key}: "{"input" if key == "run" else "data"}.invoiceId"', bad)
        _, errors = compiled(text)
        assert errors, bad


ANY = """name: pay
version: 1
steps:
  - id: await
    wait:
      any:
        - {event: billing.payment.received, correlate: {run: "input.invoiceId", event: "data.invoiceId"}}
        - {signal: cancel}
        - {sleep: 1d}
"""


def test_an_any_wait_lowers_its_branches_and_without_a_timeout_ends_with_the_run():
    [ir], errors = compiled(ANY)
    assert not errors
    w = ir.nodes[0].wait
    assert (w.kind, [b.kind for b in w.branches], w.timeout_ms) == ("any", ["event", "signal", "sleep"],
                                                                    ir.deadline_ms)
    assert (w.branches[1].signal, w.branches[2].sleep_ms, w.branches[0].since) == ("cancel", 86_400_000,
                                                                                    "run_start")


def test_an_any_branch_waits_for_exactly_one_thing_and_an_event_branch_needs_correlate():
    for bad in ("        - {signal: cancel, sleep: 1d}\n", "        - {event: x.y}\n", "        - {}\n"):
        _, errors = compiled(ANY + bad)
        assert errors, bad
