"""Helpers shared by the connector tests."""

from __future__ import annotations

import socket


def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def run_step(registry, uses, params, ctx):
    """What the interpreter does with rendered parameters: find the connector, validate, invoke."""
    from anthares44.automation.stdlib_connectors.registry import validate_params

    conn = registry.get(uses)
    return await conn.invoke(validate_params(conn, params), ctx)
