"""Run-time rendering of IR parameters: native values for single expressions, strict undefined names, sandbox."""

from __future__ import annotations

import pytest

from anthares44.automation.errors import E_TEMPLATE, A44Error
from anthares44.automation.runtime import render
from anthares44.automation.runtime.render import make_scope, render_params, render_value

SCOPE = make_scope(
    input={"invoiceId": 42, "amount": 12.5, "customer": {"name": "Ana", "vip": True}, "lines": [{"sku": "a"},
                                                                                                {"sku": "b"}]},
    steps={"reserve-funds": {"output": {"authorizationId": "auth_1"}, "status": "succeeded"}},
    trigger={"event": {"type": "billing.invoice.finalized"}},
    run={"id": "run_01X", "workflow_id": "wf_x", "idempotency_key": "k1", "attempt": 2, "step_id": "mark-paid"})


def tpl(text):
    return {"$tpl": text}


def test_single_expression_keeps_its_type():
    out = render_params({"query": "update t set x = 1 where id = $1",
                         "params": [tpl("{{ input.invoiceId }}"), tpl("{{ run.id }}"), tpl("{{ run.step_id }}"),
                                    tpl("{{ input.amount }}"), tpl("{{input.customer}}"), tpl("{{ input.customer.vip }}"),
                                    tpl("{{ input.lines | map(attribute='sku') }}"), None, 3]}, SCOPE)
    assert out["params"] == [42, "run_01X", "mark-paid", 12.5, {"name": "Ana", "vip": True}, True, ["a", "b"], None, 3]
    assert out["query"] == "update t set x = 1 where id = $1"


def test_mixed_text_renders_to_a_string():
    assert render_value("inv-{{ input.invoiceId }}", SCOPE) == "inv-42"
    assert render_value("{{ input.invoiceId }}-{{ run.attempt }}", SCOPE) == "42-2"  # two blocks: text
    assert render_value(" {{ input.invoiceId }}", SCOPE) == " 42"
    assert render_value("{% if input.customer.vip %}vip{% endif %}", SCOPE) == "vip"
    assert render_value("{{ steps['reserve-funds'].output.authorizationId }}", SCOPE) == "auth_1"


def test_nested_structures_render_every_leaf():
    params = {"output": {"who": tpl("{{ input.customer.name }}"), "ids": [tpl("{{ input.invoiceId }}"), {"k": tpl(
        "{{ trigger.event.type }}")}], "plain": {"n": 1}}}
    assert render_params(params, SCOPE) == {"output": {"who": "Ana", "ids": [42, {"k": "billing.invoice.finalized"}],
                                                       "plain": {"n": 1}}}


def test_undefined_name_is_a_permanent_template_error_naming_it():
    for text, name in (("{{ input.missing }}", "missing"), ("id={{ nothing }}", "nothing"),
                       ("{{ steps.later.output }}", "later")):
        with pytest.raises(A44Error) as exc:
            render_params({"x": [tpl(text)]}, SCOPE)
        err = exc.value
        assert err.code == E_TEMPLATE and not err.retryable
        assert text in err.message and name in err.message


def test_sandbox_refuses_attribute_escapes_and_mutation():
    for text in ("{{ ''.__class__ }}", "{{ input.__class__.__mro__ }}", "x{{ ().__class__.__bases__ }}",
                 "{{ input.lines.append(1) }}", "{{ input.customer.update({'a': 1}) }}"):
        with pytest.raises(A44Error) as exc:
            render_value(text, SCOPE)
        assert exc.value.code == E_TEMPLATE and "sandbox" in exc.value.message, text
    assert SCOPE["input"]["lines"] == [{"sku": "a"}, {"sku": "b"}]


def test_other_failures_are_template_errors():
    for text in ("{{ 1 / 0 }}", "{{ unclosed", "{{ input.invoiceId | nosuchfilter }}"):
        with pytest.raises(A44Error) as exc:
            render_value(text, SCOPE)
        assert exc.value.code == E_TEMPLATE


def test_compiled_templates_are_cached():
    text = "{{ input.invoiceId + 1 }}"
    render_value(text, SCOPE)
    before = render._compiled.cache_info().hits
    assert render_value(text, make_scope(input={"invoiceId": 1})) == 2
    assert render._compiled.cache_info().hits == before + 1
