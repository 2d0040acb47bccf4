"""An aiohttp server on 127.0.0.1 running on its own thread and event loop, for tests whose code under test
blocks the main thread (subprocess daemons, synchronous CLI calls). Subclasses add routes in `routes(app)`."""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web


class ThreadedServer:
    def __init__(self):
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.port = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"{type(self).__name__} did not start")

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self):
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        self.routes(app)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def close(self):
        self._loop.call_soon_threadsafe(self._loop.stop)
