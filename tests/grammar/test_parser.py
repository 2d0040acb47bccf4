"""Parser: syntax coverage, exact error offsets and messages, limits, no lark exception leaking."""

from __future__ import annotations

import pytest

from anthares44.automation.grammar import compile_expression
from anthares44.automation.grammar.api import compile_unchecked
from anthares44.automation.grammar.values import UInt


def issue(text):
    res = compile_expression(text)
    assert res.program is None, text
    return res.issues[0]


def value(text, **vars):
    res = compile_unchecked(text)
    assert res.program is not None, res.issues
    return res.program.evaluate(vars)


@pytest.mark.parametrize("text, offset, fragment", [
    ("1 +", 3, "found end of input"),
    ("(1", 2, "expected ')'"),
    ("a.b.", 4, "an identifier"),
    ("1 ~ 2", 2, "unexpected character '~'"),
    ("'abc", 0, "unterminated string"),
    ("x == 'a\\q'", 7, "invalid escape"),
    ("[1, 2", 5, "found end of input"),
    ("a ? b", 5, "':'"),
    ("if", 0, "reserved identifier 'if'"),
    ("x + while", 4, "reserved identifier 'while'"),
    ("9223372036854775808", 0, "out of range"),
    ("18446744073709551616u", 0, "out of range"),
    ("x.all(1, true)", 6, "simple name"),
    ("has(x)", 0, "has()"),
    ("1 + + 2", 4, "found '+'"),
    ("", 0, "empty expression"),
    ("a b", 2, "found 'b'"),
])
def test_syntax_errors_have_offsets(text, offset, fragment):
    i = issue(text)
    assert i.code == "A44300" and i.severity == "error"
    assert i.offset == offset, (i.offset, i.message)
    assert fragment in i.message


def test_expected_found_message():
    i = issue("data.amount >")
    assert i.message.startswith("expected ") and "found end of input" in i.message
    assert "an identifier" in i.message  # the useful words come first


@pytest.mark.parametrize("text, expected", [
    ("0x1F", 31), ("1u", UInt(1)), ("0x10u", UInt(16)), ("1.5e2", 150.0), (".5", 0.5), ("2e3", 2000.0),
    ("-9223372036854775808", -9223372036854775808), ("--19", 19), ("!!true", True),
    ("'a\\x41\\101\\u0041\\U00000041\\n'", "aAAAA\n"), ('r"\\n"', "\\n"), ("R'\\d'", "\\d"),
    ("'''a\n'b'''", "a\n'b"), ('"""x"y"""', 'x"y'), ("b'\\xff\\377a'", b"\xff\xffa"), ("b'é'", "é".encode()),
    ("rb'\\x'", b"\\x"), ("null", None), ("[1, 2,]", [1, 2]), ("{'a': 1,}", {"a": 1}),
    ("1 + 2 * 3 - 4 / 2 % 3", 5), ("true ? 1 : 2", 1), ("false || true && false", False),
    ("1 < 2 == true", True), ("2 in [1, 2]", True), (".x", 3), ("x // comment\n + 1", 4),
    ("{'content-type': 1}.`content-type`", 1), ("[[1]][0][0]", 1),
])
def test_literals_and_precedence(text, expected):
    got = value(text, x=3)
    assert got == expected and type(got) is type(expected)


def test_message_construction_parses_but_is_reported():
    res = compile_expression("pkg.Msg{field: 1}")
    assert res.program is None and res.issues[0].code == "A44306"
    assert "not supported" in res.issues[0].message
    assert compile_unchecked("pkg.Msg{field: 1, other: 'x',}").program is not None


@pytest.mark.parametrize("text", [
    "(" * 10_000 + "1" + ")" * 9_999,
    "[" * 5000 + "]" * 5000,
    "-" * 15_000 + "1",
    "!" * 15_000 + "true",
    "a" + ".b" * 5_000,
    "f(" * 3000 + ")" * 3000,
    "1" + " + 1" * 4_000,
    "x" * 30_000,
])
def test_pathological_nesting_is_an_issue_not_a_crash(text):
    res = compile_expression(text)
    assert res.program is None
    assert res.issues[0].code in ("A44300", "A44305")


def test_depth_limit_code_and_reasonable_nesting_ok():
    assert compile_expression("[" * 150 + "]" * 150).issues[0].code == "A44305"
    assert compile_expression("(" * 500 + "1" + ")" * 500).program is not None  # parens add no depth
    assert value("[" * 40 + "]" * 40) is not None
    assert value(" || ".join(["false"] * 500) + " || true") is True  # chains are flat


def test_ir_round_trip_without_reparsing():
    from anthares44.automation.grammar import load_program
    res = compile_expression("data.items.exists(i, i.price > 10u) ? b'x' : b'y'")
    ir = res.program.to_ir()
    import json
    ir2 = json.loads(json.dumps(ir))
    prog = load_program(ir2)
    act = {"data": {"items": [{"price": 11}]}}
    assert prog.evaluate(act) == res.program.evaluate(act)
    assert prog.roots == frozenset({"data"})
    ir2["ast"] = {"garbage": True}
    assert load_program(ir2).evaluate(act) == b"x"  # falls back to the text
    with pytest.raises(ValueError):
        load_program({"cel": "1 +"})
