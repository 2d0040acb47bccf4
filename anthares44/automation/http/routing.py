"""The REST API's route table: each `/v1/automation` endpoint declared once, with its method, path, scope,
parameters, body and answer models. `build_app` registers the table, `api_auth` reads the scope from it, and
openapi.py generates `openapi.json` from it, so the document cannot drift from what is served."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

READ, WRITE, ADMIN = "automation:read", "automation:write", "automation:admin"


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Callable
    summary: str
    scope: str
    body: type[BaseModel] | None = None
    answers: dict[int, Any] = field(default_factory=dict)   # status -> model, or a description for other media
    query: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    errors: tuple[int, ...] = ()
    tag: str = "runs"


ROUTES: list[Route] = []
_BY_HANDLER: dict[Callable, Route] = {}


def route(method: str, path: str, summary: str, *, scope: str | None = None, body: type[BaseModel] | None = None,
          answers: dict[int, Any] | None = None, query: tuple[str, ...] = (), headers: tuple[str, ...] = (),
          errors: tuple[int, ...] = (), tag: str = "runs"):
    """Declare the decorated handler as `method path`; the scope defaults to read for GET, write otherwise."""
    def register(fn: Callable) -> Callable:
        r = Route(method, path, fn, summary, scope or (READ if method == "GET" else WRITE), body,
                  answers or {}, query, headers, tuple(sorted({400, 401, 403, *errors})), tag)
        assert (method, path) not in {(x.method, x.path) for x in ROUTES}, f"{method} {path} declared twice"
        ROUTES.append(r)
        _BY_HANDLER[fn] = r
        return fn
    return register


def scope_of(handler: Callable, method: str) -> str:
    r = _BY_HANDLER.get(handler)
    return r.scope if r is not None else (READ if method in ("GET", "HEAD") else WRITE)


def register_all(router, routes: list[Route]) -> None:
    for r in routes:
        if r.method == "GET":
            router.add_get(r.path, r.handler)   # and HEAD, as aiohttp does
        else:
            router.add_route(r.method, r.path, r.handler)
