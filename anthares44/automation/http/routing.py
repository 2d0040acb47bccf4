"""The REST API's route table: each `/v1/automation` endpoint (its method and path from app/contract/endpoints.py,
which the REST client builds its calls from) declared once, with its scope, parameters, body and answer models
(app/contract/models/). `build_app` registers the table, `api_auth` reads the scope from it, and openapi.py
generates `openapi.json` from it, so the document cannot drift from what is served."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from ..app.contract.endpoints import Endpoint

READ, WRITE, ADMIN = "automation:read", "automation:write", "automation:admin"
APPROVE = "automation:approve"      # decide approvals (§20): approvers need no write rights
# what any route may answer: a refused parameter or body, token or scope, and a database or server that cannot
# take the request now (E_DB_UNAVAILABLE, E_SERVER_BUSY)
ALWAYS = (400, 401, 403, 503)


@dataclass(frozen=True)
class Route:
    endpoint: Endpoint
    handler: Callable
    summary: str
    scope: str
    body: type[BaseModel] | None = None
    query: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    errors: tuple[int, ...] = ()
    tag: str = "runs"

    @property
    def method(self) -> str:
        return self.endpoint.method

    @property
    def path(self) -> str:
        return self.endpoint.path

    @property
    def answers(self) -> dict[int, type[BaseModel]]:
        """status -> the model of the answer's JSON"""
        return self.endpoint.answers


ROUTES: list[Route] = []
_BY_HANDLER: dict[Callable, Route] = {}


def route(endpoint: Endpoint, summary: str, *, scope: str | None = None, body: type[BaseModel] | None = None,
          query: tuple[str, ...] = (), headers: tuple[str, ...] = (),
          errors: tuple[int, ...] = (), tag: str = "runs"):
    """Declare the decorated handler as `endpoint`; the scope defaults to read for GET, write otherwise."""
    method = endpoint.method

    def register(fn: Callable) -> Callable:
        r = Route(endpoint, fn, summary, scope or (READ if method == "GET" else WRITE), body, query, headers, tuple(sorted({*ALWAYS, *errors})), tag)
        assert endpoint not in {x.endpoint for x in ROUTES}, f"{method} {endpoint.path} declared twice"
        ROUTES.append(r)
        _BY_HANDLER[fn] = r
        return fn
    return register


def route_of(handler: Callable) -> Route | None:
    """The declaration of a handler the table registered (None for the others: webhooks, /metrics...)."""
    return _BY_HANDLER.get(handler)


def scope_of(handler: Callable, method: str) -> str:
    r = _BY_HANDLER.get(handler)
    return r.scope if r is not None else (READ if method in ("GET", "HEAD") else WRITE)


def register_all(router, routes: list[Route]) -> None:
    for r in routes:
        if r.method == "GET":
            router.add_get(r.path, r.handler)   # and HEAD, as aiohttp does
        else:
            router.add_route(r.method, r.path, r.handler)
