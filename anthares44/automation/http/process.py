"""One serving process: `app.serve()` with this edge's HTTP plane (`HttpServer`) until SIGTERM or SIGINT, what
`a44 automation serve` and `a44 automation ingest` run. app/ sits below the edges, so it is handed the server
class here rather than importing http/."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from ..app.serve import ServeSettings, serve


def _http_server(store, settings):
    """The HTTP plane's factory (app.serve's HttpFactory), importing aiohttp's server only when one is served."""
    from .server import HttpServer

    return HttpServer(store, settings)


def serve_until_signalled(settings: ServeSettings, ready: Callable[[str | None], None] | None = None) -> None:
    """Serve `settings` until SIGTERM/SIGINT, then stop as app.serve() does (intake first, in-flight steps within
    the grace). `ready(url)` once everything listens. An A44Error (database unreachable, unsafe host) is raised."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(settings, stop, http=_http_server, ready=ready)

    asyncio.run(main())
