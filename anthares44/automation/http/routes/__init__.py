"""The REST endpoints by area, each module declaring its routes with `routing.route` (server.py holds the first
ones: publish, runs, logs, events, whoami)."""

from . import admin, monitor, operations  # noqa: F401
