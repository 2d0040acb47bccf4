"""The daemon's warm-up makes a connector's first-use pieces only for the connector types published workflows use
(runtime/engine/warmup.py, issue 32): the http client session (aiohttp, ~10 MB of an idle daemon) is made when a
published version calls `http`, not for a store whose workflows call none."""

from __future__ import annotations

from anthares44.automation.runtime.engine import warmup
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.partitions.support import compile_yaml, publish

QUIET = """\
name: quiet
version: 1
steps:
  - id: a
    uses: pass
    timeout: 1s
"""
CALLS = """\
name: calls-out
version: 1
steps:
  - id: b
    uses: http
    timeout: 5s
    method: GET
    url: http://127.0.0.1:9/x
"""


def test_the_types_published_workflows_use_and_the_http_session_only_for_them(store, aio, tmp_path):
    async def body():
        assert await warmup.used_types(store) == set()
        await publish(store, compile_yaml(tmp_path, QUIET, "quiet.yaml"))
        quiet = await warmup.used_types(store)
        registry = ConnectorRegistry()
        warmup.warm_connectors(registry, quiet)
        assert registry.get("http")._own.session is None           # nothing calls http: no client session
        await publish(store, compile_yaml(tmp_path, CALLS, "calls.yaml"))
        used = await warmup.used_types(store)
        warmup.warm_connectors(registry, used)
        made = registry.get("http")._own.session is not None
        await registry.aclose()
        return quiet, used, made

    quiet, used, made = aio(body())
    assert "http" not in quiet and "http" in used and quiet <= used
    assert made
