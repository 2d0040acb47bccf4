"""The daemon's side of workflow SQL: the `AppDatabase` its engine hands to sql/execute, ready before the first run.

At start, `open_app_database`:
  * asks the control store which role and database it runs as, and tells the wall (sql_database.Wall): a workflow
    DSN naming that role, on any database, or a project role that may connect to that database, is refused;
  * finds where each project's database is (postgres/database.resolve_projects: the embedded server's database per
    project, or the `{project}` template of A44_APP_DATABASE_URL);
  * for every project that has published a workflow: on the embedded server, makes or restores its role and
    database (postgres/projects.py: undoing whatever the role did to itself, its password and settings included);
    with a template, opens one connection through the wall, so a project whose role or grants are wrong is named in
    the log at start rather than at its first step.
A project that fails this is logged (and its steps fail with the same error, retried or not by its code); the
daemon serves the others. A project published later is set up on its first sql/execute step.
"""

from __future__ import annotations

import logging

from ...errors import A44Error
from ...redact import redact_url
from ...stdlib_connectors.sql_database import AppDatabase, TemplateLocator, Wall

lifecycle = logging.getLogger("a44.lifecycle")


def describe(app: AppDatabase) -> str:
    """What `serve` logs as workflow-sql=..."""
    if app.locator is None:
        return "none"
    if isinstance(app.locator, TemplateLocator):
        return redact_url(app.locator.template)
    return f"embedded, a database per project ({app.locator.database('{project}')})"


async def open_app_database(store, settings, *, own_store: bool) -> AppDatabase:
    """The AppDatabase of a daemon whose WorkerSettings are `settings` (its control store is `store`; `own_store`:
    the daemon connected it itself, so an embedded control store means the embedded application databases)."""
    from ..postgres.database import resolve_projects

    if settings.app_database_url:
        locator = TemplateLocator(settings.app_database_url)
    elif own_store and not settings.database_url:
        locator = resolve_projects(settings.env, start=True)
    else:
        locator = None      # a control store named explicitly is never reused for workflow SQL
    me = await store.fetchrow("control_identity")
    app = AppDatabase(locator, wall=Wall(control_role=me["role"], control_database=me["database"]))
    if locator is None:
        return app
    projects = [r["project_id"] for r in await store.fetch("projects_published")]
    app.know(projects)
    restore = getattr(locator, "restore", None)
    if restore is not None:
        failed = await restore(projects)
    else:
        failed = [f for f in [await _check(app, p) for p in projects] if f is not None]
    for project, exc in failed:
        lifecycle.warning("workflow SQL of project %s is refused: %s %s%s", project, exc.code, exc.message,
                          f" (hint: {exc.hint})" if exc.hint else "")
    return app


async def _check(app: AppDatabase, project: str) -> tuple[str, A44Error] | None:
    """Open one connection to the project's database through the wall (the pool keeps it for the first steps)."""
    from ...db_errors import translate

    try:
        pool = await app.pool(project)
        async with pool.acquire():
            return None
    except A44Error as exc:
        return project, exc
    except Exception as exc:  # noqa: BLE001 - a driver or socket failure, as the step would see it
        err = translate(exc, operation=f"the check of project {project}'s application database")
        if err is None:
            raise
        return project, err
