"""A run's events as a server-sent event stream (`logs --follow` over REST, the console's live pages): each
event with its id (a reconnecting client resumes from Last-Event-ID), then `end` once the run is terminal."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from ..jsonenc import to_json
from .limits import ClientGone, until_gone


async def stream_events(request: web.Request, events: AsyncIterator[dict], *, name: str | None = None
                        ) -> web.StreamResponse:
    """Stream `events` (each named by its kind, or all by `name`); the stream just ends when the client leaves
    or the server stops."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    try:
        async for event in until_gone(request, events):
            payload = to_json(event, indent=None)
            await resp.write(f"id: {event['id']}\nevent: {name or event['kind']}\ndata: {payload}\n\n".encode())
        await resp.write(b"event: end\ndata: {}\n\n")
        await resp.write_eof()
    except (ClientGone, ConnectionError):
        pass   # it resumes with Last-Event-ID
    return resp
