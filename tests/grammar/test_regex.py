"""`matches()` is RE2: linear time on the classic catastrophic-backtracking shapes, RE2 syntax, and syntax RE2
refuses reported as an evaluation error value (dynamic pattern) or a compile-time diagnostic (literal pattern)."""

from __future__ import annotations

import time

import pytest

from anthares44.automation.grammar import EvalError, compile_expression
from anthares44.automation.grammar.api import compile_unchecked


def _matches(text: str, pattern: str):
    prog = compile_unchecked("s.matches(p)").program
    return prog.evaluate({"s": text, "p": pattern})


@pytest.mark.parametrize("pattern, text, expected", [
    ("(a|aa)*c", "a" * 40, False),
    ("(a?){28}a{28}", "a" * 28, True),
    ("a*a*a*a*b", "a" * 2_000, False),
    (r"^(\d|\d\d)*-$", "1" * 40, False),            # the poison of the incident
    ("(a+)+$", "a" * 100_000 + "!", False),
])
def test_catastrophic_patterns_finish_in_linear_time(pattern, text, expected):
    t = time.monotonic()
    assert _matches(text, pattern) is expected
    assert time.monotonic() - t < 1


@pytest.mark.parametrize("pattern, text", [(r"\pL+", "été"), (r"(?i)ABC", "xabcx"), (r"[[:digit:]]", "a1"),
                                           (r"\Qa.b\E", "a.b"), (r"^\z", "")])
def test_re2_syntax_is_understood(pattern, text):
    assert _matches(text, pattern) is True


@pytest.mark.parametrize("pattern, reason", [
    (r"(a)\1", "backreferences"), (r"(?=a)", "lookaround"), (r"(?<!a)b", "lookaround"), (r"(?>a)", "atomic"),
    (r"a++", "possessive"), (r"a\Z", r"\z"), (r"(a", "invalid regular expression (RE2 syntax): missing )"),
    ("a{1001}", "invalid repetition size"),
])
def test_refused_syntax_is_an_error_value_with_a_reason(pattern, reason):
    with pytest.raises(EvalError) as exc:
        _matches("aaa", pattern)
    assert exc.value.code == "E_EXPR_REGEX"
    assert reason in exc.value.message


def test_a_literal_pattern_is_checked_at_compile_time():
    res = compile_expression(r"input.code.matches('(\\d)\\1')", roots={"input"})
    assert res.program is None
    (issue,) = res.issues
    assert issue.code == "A44306" and "backreferences" in issue.message
    assert r"input.code.matches('(\\d)\\1')"[issue.offset] == "'"       # points at the pattern
    ok = compile_expression(r"input.code.matches('^(\\d|\\d\\d)*-$')", roots={"input"})
    assert ok.program is not None and not ok.issues

