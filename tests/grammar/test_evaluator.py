"""Evaluator semantics: error absorption, numeric equivalence, overflow, conversions, bounds, safety."""

from __future__ import annotations

import time

import pytest

from anthares44.automation.grammar import EvalError, compile_expression
from anthares44.automation.grammar.api import compile_unchecked
from anthares44.automation.grammar.values import UInt


def ev(text, **vars):
    res = compile_unchecked(text)
    assert res.program is not None, res.issues
    return res.program.evaluate(vars)


def err(text, **vars):
    with pytest.raises(EvalError) as exc:
        ev(text, **vars)
    return exc.value.code


@pytest.mark.parametrize("text, expected", [
    ("false && (1 / 0 == 1)", False), ("(1 / 0 == 1) && false", False),
    ("true || (1 / 0 == 1)", True), ("(1 / 0 == 1) || true", True),
    ("missing.x && false", False), ("false && 'not a bool'", False), ("'s' || true", True),
    ("[1, 2].all(x, 1 / (x - 1) > 0 || x == 1)", True),
    ("[0, 1].exists(x, 1 / x == 1)", True), ("[0, 1].all(x, 1 / x == 5)", False),
    ("true ? 1 : 1 / 0", 1), ("false ? 1 / 0 : 2", 2),
])
def test_error_absorption(text, expected):
    assert ev(text) is expected or ev(text) == expected


@pytest.mark.parametrize("text, code", [
    ("true && (1 / 0 == 1)", "E_EXPR_DIV_ZERO"), ("(1 / 0 == 1) || false", "E_EXPR_DIV_ZERO"),
    ("1 / 0 == 1 ? 1 : 2", "E_EXPR_DIV_ZERO"), ("[0, 1].exists_one(x, 1 / x == 1)", "E_EXPR_DIV_ZERO"),
    ("{'a': 1}.b", "E_EXPR_NO_SUCH_KEY"), ("{'a': 1}['b']", "E_EXPR_NO_SUCH_KEY"),
    ("[1][1]", "E_EXPR_INDEX"), ("1 + 'a'", "E_EXPR_NO_SUCH_OVERLOAD"), ("1 + 1.0", "E_EXPR_NO_SUCH_OVERLOAD"),
    ("9223372036854775807 + 1", "E_EXPR_OVERFLOW"), ("-9223372036854775808 - 1", "E_EXPR_OVERFLOW"),
    ("-(-9223372036854775807 - 1)", "E_EXPR_OVERFLOW"), ("(-9223372036854775807 - 1) / -1", "E_EXPR_OVERFLOW"),
    ("0u - 1u", "E_EXPR_OVERFLOW"), ("18446744073709551615u + 1u", "E_EXPR_OVERFLOW"),
    ("5 % 0", "E_EXPR_DIV_ZERO"), ("5u / 0u", "E_EXPR_DIV_ZERO"), ("int(1e19)", "E_EXPR_OVERFLOW"),
    ("int('x')", "E_EXPR_CONVERSION"), ("uint(-1)", "E_EXPR_OVERFLOW"), ("undeclared", "E_EXPR_UNKNOWN_IDENT"),
    ("{'a': 1, 'a': 2}", "E_EXPR_DUPLICATE_KEY"), ("1 ? 2 : 3", "E_EXPR_NO_SUCH_OVERLOAD"),
    ("'abc'.matches('(a')", "E_EXPR_REGEX"), ("foo(1)", "E_EXPR_NO_SUCH_OVERLOAD"), ("x.y", "E_EXPR_TYPE"),
])
def test_errors_are_coded(text, code):
    assert err(text, x=1) == code


@pytest.mark.parametrize("amount", [600000, 600000.0, UInt(600000)])
def test_json_numbers_compare_across_types(amount):
    data = {"amountCents": amount, "currency": "BRL"}
    assert ev("data.amountCents > 500000 && data.currency == 'BRL'", data=data) is True
    assert ev("data.amountCents == 600000", data=data) is True
    assert ev("data.amountCents == 600000.0", data=data) is True
    assert ev("data.amountCents in [1, 600000u]", data=data) is True
    assert ev("{600000: 'x'}[data.amountCents]", data=data) == "x"


def test_numeric_semantics():
    assert ev("7 / -2") == -3 and ev("-7 % 2") == -1 and ev("7u % 2u") == 1
    assert ev("1.0 / 0.0") == float("inf")
    nan = ev("0.0 / 0.0")
    assert nan != nan
    assert ev("0.0 / 0.0 == 0.0 / 0.0") is False
    assert ev("1 == 1.0") is True and ev("1 == 'a'") is False and ev("[1, 2] == [1.0, 2u]") is True
    assert ev("{true: 1}[true]") == 1
    assert err("{1: 'a'}[true]") == "E_EXPR_NO_SUCH_KEY"  # bool never matches an int key


@pytest.mark.parametrize("text, expected", [
    ("size('héllo')", 5), ("size(b'\\xff')", 1), ("'abc'.size()", 3), ("size({'a': 1})", 1),
    ("'hello'.contains('ell')", True), ("'hello'.startsWith('he')", True), ("'hello'.endsWith('lo')", True),
    ("'ab12'.matches('[0-9]+$')", True), ("matches('ab', '^b')", False),
    ("int('-12')", -12), ("int(3.9)", 3), ("int(-3.9)", -3), ("uint(3)", UInt(3)), ("double('1.5')", 1.5),
    ("string(1.5)", "1.5"), ("string(2u)", "2"), ("string(b'ab')", "ab"), ("bytes('a')", b"a"),
    ("bool('true')", True), ("type(1) == int", True), ("type(type(1)) == type", True), ("dyn(1u)", UInt(1)),
    ("[1, 2] + [3]", [1, 2, 3]), ("'a' + 'b'", "ab"), ("b'a' + b'b'", b"ab"), ("'b' in {'b': 1}", True),
    ("[1, 2, 3].map(x, x * 2)", [2, 4, 6]), ("[1, 2, 3].map(x, x > 1, x * 10)", [20, 30]),
    ("[1, 2, 3].filter(x, x % 2 == 1)", [1, 3]), ("{'a': 1, 'b': 2}.all(k, k in ['a', 'b'])", True),
    ("[1, 2].exists_one(x, x > 1)", True), ("has({'a': 1}.a)", True), ("has({'a': 1}.b)", False),
    ("[[1, 2], [3]].map(x, x.map(x, x + 1))", [[2, 3], [4]]),
])
def test_standard_library(text, expected):
    got = ev(text)
    assert got == expected and type(got) is type(expected)


def test_activation_is_only_data():
    class Secret:
        password = "hunter2"
    assert err("o.password", o=Secret()) == "E_EXPR_TYPE"
    assert err("o.__class__", o=Secret()) == "E_EXPR_TYPE"
    assert err("size(o)", o=Secret()) == "E_EXPR_NO_SUCH_OVERLOAD"
    assert err("x.__len__", x=[1]) == "E_EXPR_TYPE"


@pytest.mark.parametrize("text", [
    "[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, "
    "[1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, [1,2,3,4,5,6,7,8,9,10].map(f, f))))))",
    "l.map(a, l.map(b, l.map(c, l.map(d, 1))))",
    "l.all(a, l.all(b, l.all(c, l.all(d, true)))) || true",
])
def test_cost_budget_stops_blowups(text):
    t = time.monotonic()
    with pytest.raises(EvalError) as exc:
        ev(text, l=list(range(100)))
    assert exc.value.code == "E_EXPR_COST"
    assert time.monotonic() - t < 10


def test_size_limits_stop_doubling():
    with pytest.raises(EvalError) as exc:
        ev("[s + s + s + s + s + s + s + s].map(a, a + a + a + a + a + a + a + a)", s="x" * 200_000)
    assert exc.value.code in ("E_EXPR_OVERFLOW", "E_EXPR_COST")


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a*)*b", "(\\\\1)", "(?=a)", "(?<!a)b", "(?>a)", "a++", "(a|a)*$"])
def test_pathological_regex_is_rejected_or_bounded(pattern):
    t = time.monotonic()
    res = compile_unchecked(f"s.matches('{pattern}')")
    try:
        res.program.evaluate({"s": "a" * 5000 + "!"})
    except EvalError as exc:
        assert exc.code == "E_EXPR_REGEX"
    assert time.monotonic() - t < 2


def test_deep_input_values_do_not_crash():
    deep = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(EvalError):
        ev("x == y", x=deep, y=deep)


def test_evaluate_budget_parameter_and_roots():
    prog = compile_expression("input.n > 1 && steps.a.ok && [1].all(v, v > 0)").program
    assert prog.roots == frozenset({"input", "steps"})
    with pytest.raises(EvalError) as exc:
        prog.evaluate({"input": {"n": 2}, "steps": {"a": {"ok": True}}}, budget=1)
    assert exc.value.code == "E_EXPR_COST"
    assert prog.evaluate({"input": {"n": 2}, "steps": {"a": {"ok": True}}}) is True


def test_a_deadline_stops_an_evaluation_within_its_budget():
    prog = compile_unchecked("l.map(a, l.map(b, l.map(c, a + b + c))).size() > 0").program
    t = time.monotonic()
    with pytest.raises(EvalError) as exc:
        prog.evaluate({"l": list(range(60))}, deadline=time.monotonic() + 0.01)
    assert exc.value.code == "E_EXPR_COST" and "deadline" in exc.value.message
    assert time.monotonic() - t < 1
