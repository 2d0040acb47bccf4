"""`a44 automation db start|stop|status|url|migrate`: the database in use (A44_DATABASE_URL, or the embedded
PostgreSQL under $A44_HOME) and its schema; `db url --app [--project P]` prints a project's application database,
where its workflow SQL runs (A44_APP_DATABASE_URL with `{project}`, or the embedded server's database of the
project, made and restored first).

Exit codes: 0 ok, 1 error (printed as `E_CODE message`), 3 for `status` when the embedded server is stopped
(as `pg_ctl status` does).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import EXIT_OK, EXIT_STOPPED
from ..redact import redact_url
from .output import FORMATS, settings_of


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("db", help="start/stop the embedded PostgreSQL, print its URL, apply migrations",
                              description=__doc__)
    actions = p.add_subparsers(dest="db_action", metavar="ACTION", parser_class=type(p))
    actions.required = True
    start = actions.add_parser("start", help="start the embedded PostgreSQL under $A44_HOME (no-op if running)")
    stop = actions.add_parser("stop", help="stop the embedded PostgreSQL")
    st = actions.add_parser("status", help="which database, reachable or not, migrations applied")
    url = actions.add_parser("url", help="print the URL of the database in use (psql \"$(a44 automation db url)\")")
    url.add_argument("--app", action="store_true",
                     help="a project's application database instead, where its workflow SQL runs (sql/execute)")
    url.add_argument("--project", metavar="P",
                     help="with --app: the project (default: $A44_PROJECT, else pj_default)")
    mg = actions.add_parser("migrate", help="apply pending migrations and create partitions ahead")
    for action in (start, stop, st, url, mg):
        action.add_argument("--format", "-f", choices=FORMATS, default="text", help="output format (default: text)")
    return p


def _say(args, text: str, doc: dict) -> int:
    print(json.dumps(doc) if args.format == "json" else text)
    return EXIT_OK


def run(args) -> int:
    from ..errors import A44Error
    from .output import exit_code, print_error

    try:
        return _ACTIONS[args.db_action](args)
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)


def _start(args) -> int:
    from ..app.database import embedded

    env = settings_of(args)
    if env.database_url:
        return _say(args, f"A44_DATABASE_URL is set ({redact_url(env.database_url)}); there is no embedded server "
                          f"to start", {"kind": "external", "url": redact_url(env.database_url), "started": False})
    local = embedded(env)
    local.start()
    st = local.status()
    # the roles and databases of the projects' workflow SQL, made or repaired (undoing what a role did to itself)
    projects, failed = local.restore_projects()
    for project, exc in failed:
        print(f"warning: workflow SQL of project {project}: {exc.code} {exc.message}", file=sys.stderr)
    return _say(args, f"embedded PostgreSQL running on 127.0.0.1:{st.port} (pid {st.pid}, data {st.data_dir}); "
                      f"workflow SQL databases of {len(projects) - len(failed)} project(s) in order",
                {"kind": "embedded", "running": True, "port": st.port, "pid": st.pid, "data_dir": str(st.data_dir),
                 "projects": projects, "failed": [p for p, _ in failed]})


def _stop(args) -> int:
    from ..app.database import embedded

    env = settings_of(args)
    if env.database_url:
        return _say(args, "A44_DATABASE_URL is set; a44 does not manage that server",
                    {"kind": "external", "stopped": False})
    stopped = embedded(env).stop()
    return _say(args, "embedded PostgreSQL stopped" if stopped else "embedded PostgreSQL was not running",
                {"kind": "embedded", "stopped": stopped})


def _url(args) -> int:
    from ..app.automation import resolve_project
    from ..app.database import app_url, control_url
    from ..errors import E_INVALID_ARGUMENT, E_SQL_NO_DATABASE, A44Error

    if not args.app:
        if args.project:
            raise A44Error(E_INVALID_ARGUMENT, "--project goes with --app: the control store is every project's",
                           hint="a44 automation db url --app --project P")
        found = control_url(settings_of(args), start=True)
        return _say(args, found, {"url": found})
    settings = settings_of(args)
    project = resolve_project(args.project, settings)
    url = app_url(settings, project, start=True)
    if url is None:
        raise A44Error(E_SQL_NO_DATABASE, "A44_DATABASE_URL names an external control store and "
                                          "A44_APP_DATABASE_URL is not set: there is no application database",
                       hint="set A44_APP_DATABASE_URL to a PostgreSQL URL with {project} (docs/store.md)")
    return _say(args, url, {"url": url, "project": project})


def _status(args) -> int:
    import asyncio

    from ..app.database import embedded, schema_info

    env = settings_of(args)
    url = env.database_url
    info: dict = {"kind": "external" if url else "embedded"}
    app = redact_url(env.app_database_url) if env.app_database_url else None
    if not url:
        st = embedded(env).status()
        info.update(data_dir=str(st.data_dir), running=st.running, pid=st.pid, port=st.port)
        url = st.url
        app = app or "embedded, a database per project (a44_app_<project>)"
    info["app_url"] = app
    if url:
        info["url"] = redact_url(url)
        info.update(asyncio.run(schema_info(url)))
        info["running"] = True
    code = EXIT_OK if info["running"] else EXIT_STOPPED
    if args.format == "json":
        print(json.dumps(info, indent=2))
        return code
    print(f"database: {info['kind']}" + (f" ({info['data_dir']})" if "data_dir" in info else ""))
    if not info["running"]:
        print("running: no (start it with `a44 automation db start`, or any command that needs it)")
        return code
    if "pid" in info:
        print(f"running: yes (pid {info['pid']}, 127.0.0.1:{info['port']})")
    print(f"url: {info['url']}")
    print(f"application databases (workflow SQL): {info['app_url'] or 'none (set A44_APP_DATABASE_URL)'}")
    v = info["server_version_num"]
    print(f"server: PostgreSQL {v // 10000}.{v % 10000}")
    print(f"migrations: {len(info['applied'])} applied, {len(info['pending'])} pending"
          + (f" ({', '.join(info['pending'])}: run `a44 automation db migrate`)" if info["pending"] else ""))
    print(_schema_line(info["schema"]))
    return code


def _schema_line(r: dict) -> str:
    """The schema range (docs/store.md "Rolling upgrades"): the database's schema, the oldest daemon it accepts,
    this package's daemon, and whether it may run there."""
    since = f" since {r['min_daemon_since']}" if r["min_daemon_since"] else ""
    line = (f"schema: database {r['db_schema']}, accepts daemons of schema >= {r['min_daemon_schema']}{since}; "
            f"this daemon: schema {r['daemon_schema']}")
    if r["min_daemon_schema"] > r["daemon_schema"]:
        return line + " (too old: upgrade it; serve refuses with E_DB_SCHEMA_RANGE)"
    if r["destructive_pending"]:
        return line + (f" (destructive migration {r['destructive_pending']} pending: only db migrate applies it; run "
                       f"`a44 automation db migrate` once older daemons are gone)")
    return line + " (in range)"


def _migrate(args) -> int:
    import asyncio

    from ..app.database import control_url, migrate

    url = control_url(settings_of(args), start=True)
    report = asyncio.run(migrate(url))
    if args.format == "json":
        print(json.dumps(report.__dict__, indent=2))
        return EXIT_OK
    if report.applied:
        print(f"applied: {', '.join(report.applied)}")
    else:
        print(f"up to date ({len(report.already)} migrations applied)")
    if report.partitions_created:
        print(f"created {report.partitions_created} step_attempts partitions ahead")
    for name in report.changed:
        print(f"warning: migration {name} was edited after it was applied; the database keeps the old one",
              file=sys.stderr)
    return EXIT_OK


_ACTIONS = {"start": _start, "stop": _stop, "status": _status, "url": _url, "migrate": _migrate}
