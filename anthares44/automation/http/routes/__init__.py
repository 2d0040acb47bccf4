"""The REST endpoints by area, each module declaring its routes with `routing.route`; importing this package
declares them all (server.py registers them, openapi.py documents them)."""

from . import admin, approvals, deploys, events, monitor, operations, runs  # noqa: F401
