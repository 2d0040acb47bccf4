"""OpenTelemetry traces of runs (§16, docs/observability.md): the attribute names, the W3C `traceparent` a run
inherits from the request that created it, the ids a run's trace is built on, and the tracer.

A run's trace id is its own ULID (128 bits) unless the creating request carried a `traceparent`, whose trace it
joins; the run's span id is derived from the run id. Both are computed, never stored, so every daemon that ever
holds the run's lease adds its spans to the same trace, across crashes and restarts.

Nothing here imports opentelemetry at module level (`a44 automation lint` stays cold-start cheap): `from_environment`
imports the SDK only when an `OTEL_*` variable asks for traces; otherwise it returns None and the engine does
nothing at all per attempt.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import ModuleType
from typing import Any

from .errors import E_OTEL_UNAVAILABLE, A44Error

RUN_ID = "a44.run_id"
STEP_ID = "a44.step_id"
ATTEMPT = "a44.attempt"
ATTEMPT_KIND = "a44.attempt_kind"       # action | compensation
STATUS = "a44.status"                   # the attempt's (or the run's) final status
ERROR_CODE = "a44.error_code"
QUEUE = "a44.queue"
PARTITION_KEY = "a44.partition_key"
WORKFLOW = "a44.workflow"
VERSION = "a44.version"
EPOCH = "a44.epoch"
WORKER = "a44.worker"
LEASE_GRANT = "a44.lease_grant"
INSTRUMENTATION = "anthares44.automation"
DEFAULT_SERVICE = "a44-automation"
MAX_TRACESTATE = 512                   # W3C: a vendor may drop a tracestate longer than this

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_CROCKFORD = {c: i for i, c in enumerate("0123456789ABCDEFGHJKMNPQRSTVWXYZ")}
_MASK_128 = (1 << 128) - 1


@dataclass(frozen=True)
class Parent:
    """A W3C trace context (the `traceparent` and `tracestate` headers)."""
    trace_id: int
    span_id: int
    flags: int
    tracestate: str | None = None

    @property
    def traceparent(self) -> str:
        return format_traceparent(self.trace_id, self.span_id, self.flags)


def parse_traceparent(value: str | None, tracestate: str | None = None) -> Parent | None:
    """The parent a `traceparent` header names, or None when it is absent or invalid (W3C: an invalid header is
    ignored, never an error; version ff and all-zero ids are invalid, a future version's extra fields are not)."""
    if not value:
        return None
    m = _TRACEPARENT.fullmatch(value.strip().lower())
    if m is None:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return None
    state = tracestate.strip() if tracestate else None
    if state and (len(state) > MAX_TRACESTATE or not state.isprintable()):
        state = None
    return Parent(int(trace_id, 16), int(span_id, 16), int(flags, 16), state or None)


def format_traceparent(trace_id: int, span_id: int, flags: int = 1) -> str:
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def run_trace_id(run_id: str) -> int:
    """A run's own trace id: the 128 bits of its ULID (`run_<ULID>`), so a trace id leads back to its run; any
    other id is hashed."""
    body = run_id.rsplit("_", 1)[-1].upper()
    value = 0
    if len(body) == 26 and all(c in _CROCKFORD for c in body):
        for c in body:
            value = value * 32 + _CROCKFORD[c]
        value &= _MASK_128
    return value or int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big") or 1


def run_span_id(run_id: str) -> int:
    """The span id of the run's own span, the parent of its attempt and lease-grant spans."""
    return int.from_bytes(hashlib.sha256(b"a44.run:" + run_id.encode()).digest()[:8], "big") or 1


def ns(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000) * 1000


# (span id, trace id or None) the next span gets from `RunIds`: how the run's span gets the ids computed from its run
_forced_span_id: contextvars.ContextVar[tuple[int, int | None] | None] = contextvars.ContextVar(
    "a44_forced_ids", default=None)


class Tracer:
    """Spans of runs, recorded after the fact with the instants the engine logged (an attempt's span is emitted
    once its end is committed, so a crash never leaves half a span)."""

    def __init__(self, provider: Any):
        from opentelemetry import trace

        self._trace = trace
        self.provider = provider
        self._tracer = provider.get_tracer(INSTRUMENTATION)

    def run_context(self, run_id: str, parent: Parent | None) -> Any:
        """The context the run's spans are children of: the run's span, in the incoming trace or its own."""
        t = self._trace
        trace_id = parent.trace_id if parent is not None else run_trace_id(run_id)
        flags = parent.flags if parent is not None else 1
        ctx = t.SpanContext(trace_id, run_span_id(run_id), is_remote=True, trace_flags=t.TraceFlags(flags),
                            trace_state=_trace_state(t, parent))
        return t.set_span_in_context(t.NonRecordingSpan(ctx))

    def parent_context(self, run_id: str, parent: Parent | None) -> Any:
        """The context of the run's span itself: the incoming parent, or a root in the run's own trace."""
        if parent is None:
            from opentelemetry.context import Context

            return Context()
        t = self._trace
        ctx = t.SpanContext(parent.trace_id, parent.span_id, is_remote=True, trace_flags=t.TraceFlags(parent.flags),
                            trace_state=_trace_state(t, parent))
        return t.set_span_in_context(t.NonRecordingSpan(ctx))

    def emit(self, name: str, context: Any, start: datetime, end: datetime, attributes: Mapping[str, Any], *,
             error: tuple[str | None, str] | None = None, span_id: int | None = None, trace_id: int | None = None) -> None:
        """One finished span, status ERROR when `error` (code, message) is given. `span_id` / `trace_id` pin the
        ids (the run's span) when the provider is ours."""
        token = _forced_span_id.set((span_id, trace_id) if span_id is not None else None)
        try:
            span = self._tracer.start_span(name, context=context, attributes=dict(attributes), start_time=ns(start))
        finally:
            _forced_span_id.reset(token)
        if error is not None:
            from opentelemetry.trace import Status, StatusCode

            code, message = error
            span.set_status(Status(StatusCode.ERROR, (f"{code}: {message}" if code else message)[:1000]))
        span.end(end_time=max(ns(end), ns(start)))

    def flush(self, timeout_ms: int = 5000) -> None:
        flush = getattr(self.provider, "force_flush", None)
        if flush is not None:
            flush(timeout_ms)

    def shutdown(self) -> None:
        stop = getattr(self.provider, "shutdown", None)
        if stop is not None:
            stop()


def _trace_state(t: ModuleType, parent: Parent | None) -> Any:
    """The OTel `TraceState` of `parent` (`t` is opentelemetry.trace, imported only when traces are on), or None."""
    if parent is None or not parent.tracestate:
        return None
    try:
        return t.TraceState.from_header([parent.tracestate])
    except Exception:  # noqa: BLE001 - a malformed tracestate is dropped (W3C), the parent is kept
        return None


def wants_traces(env: Mapping[str, str] | None = None) -> bool:
    """True when the standard variables ask for traces: an OTLP endpoint, or OTEL_TRACES_EXPORTER=otlp|console
    (and OTEL_SDK_DISABLED is not true, OTEL_TRACES_EXPORTER not none)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return exporter in ("otlp", "console") or bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                                                   or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def from_environment() -> Tracer | None:
    """The process's tracer as the `OTEL_*` variables configure it (exporter, endpoint, headers, batch delays,
    sampler, resource: read by the SDK itself), or None when they ask for no traces. Raises E_OTEL_UNAVAILABLE
    when traces are asked for but the SDK (the `otel` extra) is not installed or the protocol is not OTLP/HTTP."""
    env = os.environ
    if not wants_traces(env):
        return None
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip()
    if protocol != "http/protobuf":
        raise A44Error(E_OTEL_UNAVAILABLE, f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported; traces are "
                                           f"exported over OTLP/HTTP", hint="set OTEL_EXPORTER_OTLP_PROTOCOL="
                                                                            "http/protobuf (or unset it)")
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() != "console":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise A44Error(E_OTEL_UNAVAILABLE, f"the OTEL_* variables ask for traces but the OpenTelemetry SDK is not "
                                           f"installed ({exc.name})",
                       hint="pip install 'anthares44-automation[otel]', or unset OTEL_EXPORTER_OTLP_ENDPOINT") from None

    class RunIds(RandomIdGenerator):
        """Random ids, except for the run's span, whose ids are computed from the run id."""

        def generate_span_id(self) -> int:
            forced = _forced_span_id.get()
            return forced[0] if forced is not None else super().generate_span_id()

        def generate_trace_id(self) -> int:
            forced = _forced_span_id.get()
            return forced[1] if forced is not None and forced[1] is not None else super().generate_trace_id()

    named = "OTEL_SERVICE_NAME" in env or "service.name" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": DEFAULT_SERVICE}),
                              id_generator=RunIds())
    exporter = ConsoleSpanExporter() if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console" \
        else OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracer(provider)
