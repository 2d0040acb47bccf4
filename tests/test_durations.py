"""One grammar of durations and one of rates for every layer (core durations.py): the YAML `Duration` type, the
command line and the Python API read the same text the same way."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import TypeAdapter, ValidationError

from anthares44.automation.compiler.models.types import Duration
from anthares44.automation.durations import parse_duration, parse_rate

YAML = TypeAdapter(Duration)


@pytest.mark.parametrize("text, ms", [("250ms", 250), ("1h30m", 5_400_000), ("2m500ms", 120_500),
                                      ("1d", 86_400_000), ("3d", 3 * 86_400_000)])
def test_the_compiler_and_the_cli_read_a_duration_alike(text, ms):
    assert parse_duration(text) == timedelta(milliseconds=ms)
    assert YAML.validate_python(text) == ms


@pytest.mark.parametrize("text", ["1.5h", "30s1m", "1h1h", "15S", "5", "", "h", "-1s"])
def test_the_compiler_and_the_cli_refuse_a_duration_alike(text):
    with pytest.raises(ValueError):
        parse_duration(text)
    with pytest.raises(ValidationError):
        YAML.validate_python(text)


def test_the_yaml_type_keeps_its_own_rules_on_top():
    assert parse_duration("4d") == timedelta(days=4)     # a listing window may be longer than a run
    for text in ("4d", "0s"):
        with pytest.raises(ValidationError):
            YAML.validate_python(text)


@pytest.mark.parametrize("text, per_s", [("20/s", 20.0), ("600/m", 10.0), ("600/min", 10.0), ("3600/h", 1.0),
                                         ("5", 5.0), (2, 2.0), (None, None)])
def test_rates(text, per_s):
    assert parse_rate(text) == per_s


@pytest.mark.parametrize("text", ["0/s", "-3/s", "fast", "", "inf", "nan", float("inf"), float("nan"), "10/day"])
def test_bad_rates_are_refused(text):
    with pytest.raises(ValueError):
        parse_rate(text)
