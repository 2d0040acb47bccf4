"""The web console (docs/console.md): server-rendered pages at `/` over the same application functions the CLI
and the REST API call, signed in with an API token, every action a POST with a CSRF token.

`add_routes(app, ...)` is the one call http/server.py makes; the console gets the store and the per-project
`Automation` through the functions it is handed, so it never imports the server module.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from .auth import Keys
from .render import CONSOLE_KEY, Console, environment

STATIC = Path(__file__).parent / "static"


def add_routes(app: web.Application, *, store_key, automation_for: Callable, principal_key) -> None:
    from . import actions, pages

    app[CONSOLE_KEY] = Console(Keys.fresh(), environment(), store_key, automation_for, principal_key)
    r = app.router
    r.add_get("/", pages.home)
    r.add_get("/login", pages.login_form)
    r.add_post("/login", actions.login)
    r.add_post("/logout", actions.logout)
    r.add_get("/runs", pages.runs)
    r.add_get("/runs/live", pages.runs_live)
    r.add_get("/runs/{run_id}", pages.run)
    r.add_get("/runs/{run_id}/live", pages.run_live)
    r.add_get("/runs/{run_id}/attempt", pages.attempt)
    r.add_post("/runs/{run_id}/replay", actions.replay)
    r.add_post("/runs/{run_id}/resolve", actions.resolve)
    r.add_post("/runs/{run_id}/skip", actions.skip)
    r.add_post("/runs/{run_id}/cancel", actions.cancel)
    r.add_post("/runs/{run_id}/approve", actions.approve)
    r.add_get("/partitions", pages.partitions)
    r.add_get("/dlq", pages.dlq)
    r.add_get("/dlq/entries/{dead_letter_id}", pages.dlq_entry)
    r.add_post("/dlq/redrive", actions.redrive)
    r.add_get("/alerts", pages.alerts)
    r.add_get("/schedules", pages.schedules)
    r.add_static("/static/", STATIC, append_version=True)
