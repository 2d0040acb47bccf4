"""The HTTP plane of a44 automation (aiohttp): signed webhooks `POST /v1/{project}/{trigger}`, the REST API under
`/v1/automation` (token-authenticated) with its OpenAPI document, and `/metrics`. Served inside
`a44 automation serve --http-port N` and alone by `a44 automation ingest`."""

from typing import Any

__all__ = ["HttpServer", "build_app"]


def __getattr__(name: str) -> Any:
    """`HttpServer` and `build_app` on first use: a daemon without `--http-port` imports `http.process` only, and
    never loads aiohttp's server, jinja2 or prometheus_client (issue 32: idle RSS)."""
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
