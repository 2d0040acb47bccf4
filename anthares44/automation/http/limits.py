"""How long and how much the HTTP plane waits for a client: the header deadline, the body deadline and size, the
cap on open connections (docs/api.md "Limits").

Headers: aiohttp's keep-alive timer starts when a connection opens and again after every answer, and closes the
connection if no complete request line + headers arrived by then; `header_timeout` is that timer, so a slowloris
client (a header byte a second) is closed after it, whatever it keeps sending. Body: `read_body` reads under one
deadline for the whole body, so a Content-Length longer than what is sent is a 408 `E_REQUEST_TIMEOUT`, not a
handler waiting forever. Connections: past `max_connections` open ones, a new connection gets a 503
`E_SERVER_BUSY` and is closed before any of it is parsed. Streams (server-sent events): `until_gone` ends one
within a second of its client hanging up or of the server shutting down, rather than when the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.http import HttpProcessingError

from ..app.gateway import count
from ..app.serve import HttpLimits
from ..errors import E_BODY_TOO_LARGE, E_REQUEST_TIMEOUT, E_SERVER_BUSY, A44Error

log = logging.getLogger("a44.http")

MAX_LINE = 8190          # request line and each header line (aiohttp's own default, stated)
MAX_HEADERS = 128
STREAM_CHECK_S = 1.0
STOPPING_KEY = web.AppKey("stopping", asyncio.Event)


def handler_args(limits: HttpLimits) -> dict:
    """aiohttp's RequestHandler options (web.AppRunner(**handler_args(limits)))."""
    return {"keepalive_timeout": limits.header_timeout, "max_line_size": MAX_LINE, "max_field_size": MAX_LINE,
            "max_headers": MAX_HEADERS, "lingering_time": min(limits.header_timeout, 10.0), "logger": ProtocolLog()}


class ProtocolLog:
    """The logger aiohttp's protocol reports to: a request it refuses as malformed HTTP (a 4xx: bad request line,
    a control character in a header, a header too long) is one INFO line and a count, not an ERROR traceback per
    attempt; anything else is logged as aiohttp would."""

    def __init__(self) -> None:
        self._log = logging.getLogger("aiohttp.server")

    def debug(self, *args, **kwargs) -> None:
        self._log.debug(*args, **kwargs)

    def exception(self, msg, *args, exc_info=True, **kwargs) -> None:
        if isinstance(exc_info, HttpProcessingError) and 400 <= (exc_info.code or 400) < 500:
            count("http_malformed_total")
            what = " ".join(line.strip() for line in str(exc_info.message).splitlines() if line.strip())
            self._log.info("refused malformed HTTP (%s): %s", exc_info.code, what[:200])
            return
        self._log.exception(msg, *args, exc_info=exc_info, **kwargs)


class ClientGone(Exception):
    """The client closed its connection before its body was read: nobody is left to answer."""


async def read_body(request: web.Request, limit: int, timeout: float) -> bytes:
    """The body, refused with 413 `E_BODY_TOO_LARGE` as soon as it is known to exceed `limit` (Content-Length, or
    while streaming), with 408 `E_REQUEST_TIMEOUT` when it has not all arrived `timeout` seconds after the handler
    started reading it; `ClientGone` (one log line) when the client hung up first."""
    length = request.content_length
    if length is not None and length > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout):
            while chunk := await request.content.read(65536):
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                chunks.append(chunk)
    except TimeoutError:
        raise A44Error(E_REQUEST_TIMEOUT, f"the body did not arrive within {timeout:g} s ({size} of "
                                          f"{length if length is not None else 'unknown'} bytes read)") from None
    except ConnectionError:
        log.warning("client %s closed the connection mid-body on %s %s (%d bytes read)", request.remote,
                    request.method, request.path, size)
        count("http_client_gone_total")
        raise ClientGone() from None
    return b"".join(chunks)


async def until_gone(request: web.Request, items: AsyncIterator) -> AsyncIterator:
    """`items` as they come; ClientGone once the client has hung up or the application is shutting down (checked
    every STREAM_CHECK_S while waiting, since nothing else wakes a stream whose client left)."""
    stopping = request.app[STOPPING_KEY]
    it = items.__aiter__()
    try:
        while True:
            nxt = asyncio.ensure_future(it.__anext__())
            while not nxt.done():
                await asyncio.wait({nxt}, timeout=STREAM_CHECK_S)
                if not nxt.done() and (stopping.is_set() or request.transport is None
                                       or request.transport.is_closing()):
                    nxt.cancel()
                    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                        await nxt
                    raise ClientGone()
            try:
                yield nxt.result()
            except StopAsyncIteration:
                return
    finally:
        if hasattr(it, "aclose"):
            await it.aclose()


def _too_large(limit: int) -> A44Error:
    return A44Error(E_BODY_TOO_LARGE, f"the body is over {limit} bytes")


class _Busy(asyncio.Protocol):
    """A connection over the cap: one 503 answer, then closed, nothing read."""

    BODY = json.dumps({"error": {"code": E_SERVER_BUSY, "message": "the server is at its connection limit; "
                                                                   "retry shortly"}}).encode()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        count("http_connections_refused_total")
        transport.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                        b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(self.BODY), self.BODY))
        transport.close()


class CappedSite(web.TCPSite):
    """A TCPSite that hands connections past `max_connections` to `_Busy` instead of aiohttp."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, max_connections: int, **kwargs):
        super().__init__(runner, host, port, **kwargs)
        self._max_connections = max_connections

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server

        def protocol() -> asyncio.Protocol:
            return _Busy() if len(server.connections) >= self._max_connections else server()

        self._server = await asyncio.get_running_loop().create_server(
            protocol, self._host, self._port, backlog=self._backlog, reuse_address=self._reuse_address)
        self._bound_port = self._server.sockets[0].getsockname()[1]
