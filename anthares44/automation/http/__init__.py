"""The HTTP plane of a44 automation (aiohttp): signed webhooks `POST /v1/{project}/{trigger}`, the REST API under
`/v1/automation` (token-authenticated) with its OpenAPI document, and `/metrics`. Served inside
`a44 automation serve --http-port N` and alone by `a44 automation ingest`."""

from .server import HttpServer, build_app

__all__ = ["HttpServer", "build_app"]
