"""The aiohttp client session a connector uses when the engine passes none (`ctx.services["http_session"]`): made
on first use for the running event loop and made again on another loop (a connector object outlives event loops in
tests and in the CLI), closed by `aclose()`. `trust_env=False` always: a proxy from the environment must never
silently reroute a step (§14, vpn/http)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class OwnSession:
    def __init__(self, connector: Callable[[Any], Any] | None = None, **options: Any) -> None:
        self._connector = connector      # aiohttp module -> a TCPConnector, built on the loop that uses it
        self._options = options
        self.session = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self, ctx=None):
        """The engine's shared session when `ctx` carries one, else this connector's own."""
        shared = ctx.services.get("http_session") if ctx is not None else None
        if shared is not None:
            return shared
        loop = asyncio.get_running_loop()
        if self.session is None or self.session.closed or self._loop is not loop:
            import aiohttp

            extra = {"connector": self._connector(aiohttp)} if self._connector else {}
            self.session = aiohttp.ClientSession(trust_env=False, **extra, **self._options)
            self._loop = loop
        return self.session

    async def aclose(self) -> None:
        if self.session is not None and not self.session.closed:
            await self.session.close()
        self.session = None
