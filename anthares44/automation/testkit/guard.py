"""The socket guard: while a test runs under the kit, an outbound connection goes nowhere but the test's own
PostgreSQL (loopback, its port) and Unix sockets; anything else raises `OutboundBlocked` at `connect()`, so a
connector or a library that slipped past the mocks cannot reach the world from a test."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterable, Iterator


class OutboundBlocked(PermissionError):
    """An outbound connection the test kit's socket guard refused."""


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


@contextlib.contextmanager
def socket_guard(allowed_ports: Iterable[int]) -> Iterator[None]:
    """Within the block, `socket.connect` / `connect_ex` allow only loopback on `allowed_ports` and AF_UNIX."""
    ports = set(allowed_ports)
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock: socket.socket, address) -> None:
        if sock.family == getattr(socket, "AF_UNIX", None):
            return
        host, port = address[0], address[1]
        if _is_loopback(str(host)) and port in ports:
            return
        raise OutboundBlocked(f"the a44 test kit blocks outbound connections: {host}:{port} (only the test's "
                              f"PostgreSQL on loopback is reachable; mock the connector that wanted it)")

    def connect(self, address):
        check(self, address)
        return real_connect(self, address)

    def connect_ex(self, address):
        check(self, address)
        return real_connect_ex(self, address)

    # patching the class is the point: every socket the test process opens, whoever made it, goes through the check
    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex  # type: ignore[method-assign]
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex = real_connect, real_connect_ex  # type: ignore[method-assign]
