"""Property tests: no input text and no generated expression escapes as anything but issues/EvalError."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anthares44.automation.grammar import EvalError, compile_expression, load_program
from anthares44.automation.grammar.api import compile_unchecked

VARS = {"data": {"amountCents": 600000.0, "currency": "BRL", "items": [1, 2.5, "x", None, {"k": [True]}]},
        "n": 3, "s": "héllo", "l": [1, 2, 3], "m": {"a": 1, "b": {"c": 2}}}
ALPHABET = st.sampled_from(list("abnlsmxy0123456789._-+*/%!<>=&|?:()[]{},'\"\\ urbe`\n") +
                           ["true", "false", "null", "in", "size", "has(", ".all(", ".map(", ".exists(",
                            "1u", "1.5", "b'", "r'", "'''", "\\x", "\\u", "data.", "&&", "||", "==", "matches("])


def _safe(res):
    assert res.program is not None or res.issues
    for i in res.issues:
        assert i.code.startswith("A443") and isinstance(i.offset, int) and i.offset >= 0
    if res.program is not None:
        try:
            res.program.evaluate(VARS)
        except EvalError as exc:
            assert exc.code.startswith("E_EXPR_")


@settings(max_examples=400, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ALPHABET, max_size=30).map("".join))
def test_random_token_soup(text):
    _safe(compile_expression(text, roots={"data", "n"}, step_ids=set(), expect_bool=True))
    _safe(compile_unchecked(text))


@settings(max_examples=200, deadline=1000)
@given(st.text(max_size=60))
def test_random_unicode(text):
    _safe(compile_unchecked(text))


_leaf = st.one_of(
    # a negative literal is unary minus applied to what follows: `-9223372036854775808[0]` indexes the
    # out-of-range positive literal first, so generated negatives are parenthesised
    st.integers(-2 ** 63, 2 ** 63 - 1).map(lambda i: f"({i})" if i < 0 else str(i)), st.sampled_from(["1u", "0u", "18446744073709551615u", "1.5", "0.0",
                                                              "-0.0", "1e308", "'a'", "b'x'", "true", "null",
                                                              "n", "s", "l", "m", "data.amountCents", "m.b", "x"]))


def _extend(children):
    binop = st.sampled_from(["+", "-", "*", "/", "%", "==", "!=", "<", ">=", "&&", "||", "in"])
    return st.one_of(
        st.tuples(children, binop, children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["!", "-"]), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(children, children, children).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
        st.lists(children, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.tuples(children, children).map(lambda t: f"{{{t[0]}: {t[1]}}}"),
        st.tuples(children, children).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(st.sampled_from(["size", "int", "uint", "double", "string", "bytes", "bool", "type", "dyn"]),
                  children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(children, st.sampled_from(["all", "exists", "exists_one", "map", "filter"]), children)
          .map(lambda t: f"{t[0]}.{t[1]}(x, {t[2]})"),
        st.tuples(children, st.sampled_from(["contains", "startsWith", "endsWith", "matches"]), children)
          .map(lambda t: f"{t[0]}.{t[1]}({t[2]})"),
    )


EXPRS = st.recursive(_leaf, _extend, max_leaves=25)


@settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRS)
def test_generated_expressions(text):
    res = compile_unchecked(text)
    assert res.program is not None, (text, res.issues)
    _safe(res)
    _safe(compile_expression(text, roots=set(VARS)))
    # IR round trip gives the same answer
    prog = load_program(res.program.to_ir())
    a = b = None
    try:
        a = res.program.evaluate(VARS)
    except EvalError as exc:
        a = exc.code
    try:
        b = prog.evaluate(VARS)
    except EvalError as exc:
        b = exc.code
    assert a == b or (a != a and b != b)
