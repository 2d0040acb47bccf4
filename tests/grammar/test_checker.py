"""Checker: unknown roots, unknown/later steps with hints, obvious type errors, expect_bool, codes."""

from __future__ import annotations

import pytest

from anthares44.automation import diagnostics
from anthares44.automation.grammar import compile_expression

ROOTS = {"input", "steps", "trigger"}


def issues(text, **kw):
    kw.setdefault("roots", ROOTS)
    return compile_expression(text, **kw).issues


def test_codes_registered():
    for code in ("A44300", "A44301", "A44302", "A44303", "A44304", "A44305"):
        assert code in diagnostics.CODES


def test_unknown_root_with_hint_and_offset():
    (i,) = issues("input.a > 1 && inptu.b")
    assert (i.code, i.offset, i.length) == ("A44301", 15, 5)
    assert "inptu" in i.message and "input" in i.hint


def test_roots_none_means_no_root_check_and_comprehension_vars_are_not_roots():
    assert compile_expression("whatever.x > 1", roots=None).program is not None
    assert issues("input.items.all(item, item.qty > 0)") == []
    assert issues("type(input.x) == int") == []


def test_unknown_step_dot_and_index():
    (i,) = issues("steps.chrge.output.ok", step_ids={"charge", "reserve-funds"})
    assert i.code == "A44302" and i.offset == 6 and "steps.charge" in i.hint
    (i,) = issues("steps['reserve-fund'].ok", step_ids={"charge", "reserve-funds"})
    assert i.code == "A44302" and i.offset == 6 and "steps['reserve-funds']" in i.hint
    assert issues("steps['reserve-funds'].ok && steps.charge.ok", step_ids={"charge", "reserve-funds"}) == []


def test_later_step_is_reported():
    (i,) = issues("steps.notify.ok", step_ids=set())
    assert i.code == "A44302" and "earlier" in i.message


def test_dashed_step_id_gets_bracket_hint_and_no_noise():
    found = issues("steps.reserve-funds.output.ok", step_ids={"reserve-funds"})
    assert [i.code for i in found] == ["A44302"]
    assert found[0].hint == "write steps['reserve-funds']"


@pytest.mark.parametrize("text, fragment", [
    ("'a' + 1", "no operator +"), ("!'x'", "operator !"), ("1 && true", "needs booleans"),
    ("size(1)", "size()"), ("1 < 'a'", "cannot compare"), ("-'a'", "negate"), ("1 in 2", "'in'"),
    ("'a'.contains(1)", "contains()"), ("nosuchfn(1)", "unknown function"), ("'a'.size(1)", "cannot be called"),
    ("1 ? 2 : 3", "condition"), ("(1).x", "cannot select"), ("[1].all(x, 1)", "predicate"),
    ("true[0]", "cannot index"), ("{[1]: 2}", "map key"), ("1.0 % 2.0", "operator %"),
])
def test_obvious_type_errors(text, fragment):
    found = issues(text, roots=None)
    assert found and found[0].code == "A44303", found
    assert fragment in found[0].message


@pytest.mark.parametrize("text", [
    "input.a + 1", "input.a < 'x'", "size(input.s) > 0", "1 == 'a'", "dyn(1) + 1", "[1] + input.l",
    "input.x.contains('a')", "1u + 2u", "int('1') + 1", "input.m['k'] && true",
])
def test_no_false_positives(text):
    assert issues(text) == []


def test_expect_bool():
    (i,) = issues("1 + 2", expect_bool=True)
    assert i.code == "A44304"
    assert issues("input.flag", expect_bool=True) == []        # dyn: cannot know
    assert issues("input.n > 2", expect_bool=True) == []
    assert issues("'x'", expect_bool=False) == []
    assert issues("[1].map(x, x)", expect_bool=True)[0].code == "A44304"


def test_issue_means_no_program():
    res = compile_expression("'a' + 1")
    assert res.program is None and res.issues[0].severity == "error"
