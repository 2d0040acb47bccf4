"""The tracer comes from the standard OTEL_* variables (none: no tracer, the engine does nothing per attempt); a
configuration the process cannot honour stops it with E_OTEL_UNAVAILABLE instead of dropping spans in silence;
`traceparent` headers are parsed as W3C says (an invalid one is ignored); a run's trace id is its ULID."""

import sys
from datetime import UTC, datetime

import pytest

from anthares44.automation import tracing
from anthares44.automation.errors import E_OTEL_UNAVAILABLE, A44Error
from anthares44.automation.runtime.ulid import new_run_id


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
              "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(k, raising=False)


@pytest.mark.parametrize("env, wanted", [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, False),
])
def test_traces_only_when_the_variables_ask(env, wanted):
    assert tracing.wants_traces(env) is wanted


def test_no_variables_no_tracer():
    assert tracing.from_environment() is None


def test_grpc_is_refused_not_ignored(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(A44Error) as e:
        tracing.from_environment()
    assert e.value.code == E_OTEL_UNAVAILABLE


def test_missing_sdk_is_refused_with_the_extra_to_install(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)     # import raises ImportError
    with pytest.raises(A44Error) as e:
        tracing.from_environment()
    assert e.value.code == E_OTEL_UNAVAILABLE and "[otel]" in e.value.hint


@pytest.mark.parametrize("header", [
    None, "", "garbage", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
])
def test_invalid_traceparent_is_ignored(header):
    assert tracing.parse_traceparent(header) is None


def test_traceparent_round_trips_and_a_future_version_is_read():
    h = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    p = tracing.parse_traceparent(h.upper(), "a=1")
    assert p.traceparent == h and p.tracestate == "a=1"
    assert tracing.parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x").flags == 0
    assert tracing.parse_traceparent(h, "x" * 600).tracestate is None


def test_a_runs_trace_id_is_its_ulid():
    run_id = new_run_id(datetime.now(UTC))
    body = run_id.split("_", 1)[1]
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    value = 0
    for c in body:
        value = value * 32 + alphabet.index(c)
    assert tracing.run_trace_id(run_id) == value and 0 < value < 1 << 128
    assert tracing.run_span_id(run_id) == tracing.run_span_id(run_id) != tracing.run_span_id(new_run_id(datetime.now(UTC)))
