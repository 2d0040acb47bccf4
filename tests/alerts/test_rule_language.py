"""The alert rule language (grammar/alert_rules.py), fuzzed with hypothesis: conditions and filters print and parse
back to the same value, any text either parses or is an A44Error with the language's code (never another
exception), and the functions evaluate as documented (coverage of the window, counter resets)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anthares44.automation.errors import E_ALERT_CONDITION, E_ALERT_FILTER, A44Error
from anthares44.automation.grammar.alert_rules import (
    FUNCTIONS,
    OPERATORS,
    Condition,
    Matcher,
    evaluate,
    parse_condition,
    parse_filter,
)

WINDOWS = st.sampled_from([0.5, 1, 15, 90, 600, 3600, 5400, 86400])
NUMBERS = st.one_of(st.integers(-10**6, 10**6).map(float),
                    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))


@given(st.one_of(st.none(), st.sampled_from(FUNCTIONS)), WINDOWS, st.sampled_from(OPERATORS), NUMBERS)
def test_a_condition_prints_and_parses_back(function, window, op, threshold):
    cond = Condition(function, window if function else None, op, threshold)
    assert parse_condition(str(cond)) == cond


LABELS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)


@given(st.lists(st.tuples(LABELS, st.booleans(), st.text(max_size=12)), max_size=4))
def test_a_filter_prints_and_parses_back(items):
    matchers = [Matcher(label, negate, value) for label, negate, value in items]
    assert parse_filter(", ".join(str(m) for m in matchers)) == matchers


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list('min_overtimeaxgrcs()0123456789.e+-<>=!" ,mhdsq\\')), max_size=30))
def test_any_text_parses_or_is_a_coded_error(text):
    for parse, code in ((parse_condition, E_ALERT_CONDITION), (parse_filter, E_ALERT_FILTER)):
        try:
            parse(text)
        except A44Error as exc:
            assert exc.code == code
            assert exc.message and exc.hint


T0 = datetime(2026, 7, 19, 14, 0, tzinfo=UTC)


def _series(values, step=15):
    return [(T0 + timedelta(seconds=step * i), float(v)) for i, v in enumerate(values)]


def test_windowed_functions_need_their_window_covered():
    samples = _series([3] * 41)                    # 10 minutes
    now = samples[-1][0]
    v = evaluate(parse_condition("min_over_time(10m) > 0"), samples, now, 7.5)
    assert (v.firing, v.value, v.samples) == (True, 3.0, 41)
    v = evaluate(parse_condition("min_over_time(10m) > 0"), samples[1:], now, 7.5)
    assert (v.firing, v.reason) == (None, "samples cover 9m45s of 10m")
    assert evaluate(parse_condition("> 2"), samples[-1:], now, 7.5).firing is True


@pytest.mark.parametrize("cond, values, expected", [
    ("increase(1m) > 0", [10, 12, 15, 15, 20], 10.0),
    ("increase(1m) > 0", [10, 12, 3, 5, 6], 8.0),           # a reset to 3 counts as 3 grown from 0
    ("rate(1m) > 0", [0, 15, 30, 45, 60], 1.0),
    ("avg_over_time(1m) > 0", [1, 2, 3, 4, 5], 3.0),
    ("max_over_time(1m) > 0", [1, 9, 3, 4, 5], 9.0),
])
def test_functions(cond, values, expected):
    samples = _series(values)
    assert evaluate(parse_condition(cond), samples, samples[-1][0], 7.5).value == pytest.approx(expected)


def test_a_counter_series_born_in_the_window_counts_from_zero_only_when_the_project_was_sampled_before():
    """A series that first appears 5 minutes into a 10-minute window, at 2 then 3: increase 3 (from 0 at the
    window's start) when other samples of the project reach back to the window's start; not judged (None) when
    the sampler itself started inside the window (a fresh daemon: cumulative counters are not growth)."""
    cond = parse_condition("increase(10m) > 0")
    now = T0 + timedelta(minutes=10)
    born = [(T0 + timedelta(minutes=5), 2.0), (T0 + timedelta(minutes=6), 3.0)]
    v = evaluate(cond, born, now, 7.5, sampled_since=T0)
    assert (v.firing, v.value) == (True, 3.0)
    assert evaluate(cond, born, now, 7.5, sampled_since=T0 + timedelta(minutes=5)).firing is None
    assert evaluate(cond, born, now, 7.5).firing is None
    gauge = evaluate(parse_condition("min_over_time(10m) > 0"), born, now, 7.5, sampled_since=T0)
    assert gauge.firing is None                      # only counters are assumed 0 before they exist
