"""A real OTLP/HTTP trace receiver on 127.0.0.1: `POST /v1/traces` bodies (protobuf, gzip or not) decoded as
`ExportTraceServiceRequest` with opentelemetry-proto, each span kept as a plain dict."""

from __future__ import annotations

import gzip
import threading
import time

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.loopback import ThreadedServer


def _value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class OtlpReceiver(ThreadedServer):
    def __init__(self):
        self.spans: list[dict] = []
        self.requests = 0
        self._lock = threading.Lock()
        super().__init__()

    def routes(self, app):
        app.router.add_post("/v1/traces", self._traces)

    async def _traces(self, request):
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        req = ExportTraceServiceRequest.FromString(body)
        got = []
        for rs in req.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append({"name": s.name, "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                                "parent": s.parent_span_id.hex() or None, "start": s.start_time_unix_nano,
                                "end": s.end_time_unix_nano, "status": s.status.code, "message": s.status.message,
                                "attributes": {a.key: _value(a.value) for a in s.attributes},
                                "scope": ss.scope.name, "service": resource.get("service.name")})
        with self._lock:
            self.requests += 1
            self.spans.extend(got)
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")

    def named(self, prefix: str) -> list[dict]:
        with self._lock:
            return [s for s in self.spans if s["name"].startswith(prefix)]

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if predicate(list(self.spans)):
                    return
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; got {[s['name'] for s in self.spans]}")
