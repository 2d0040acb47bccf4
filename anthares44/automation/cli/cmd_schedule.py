"""`a44 automation schedule preview FILE [--trigger ID] --from ISO --to ISO [--format json]`: every firing of the
schedule triggers in FILE over a window (UTC instant, local time with offset, occurrence key, and whether the
firing was shifted out of a DST gap or is the second instant of a fold), computed as the scheduler does.

`schedule occurrences [--trigger ID]` lists what the scheduler recorded in the database."""

from __future__ import annotations

import argparse
import json
import sys

from .output import add_target_options


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("schedule", help="preview schedule firings; list recorded occurrences",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="schedule_cmd", metavar="COMMAND")
    sub.required = True
    pv = sub.add_parser("preview", help="the firings of schedule triggers over a window, before publishing")
    pv.add_argument("file", metavar="FILE", help="a trigger file, a workflow file or a directory")
    pv.add_argument("--trigger", metavar="ID", help="only this trigger")
    pv.add_argument("--from", dest="start", required=True, metavar="ISO",
                    help="window start, inclusive (an ISO instant; without offset: local time of the trigger)")
    pv.add_argument("--to", dest="end", required=True, metavar="ISO", help="window end, exclusive")
    pv.add_argument("--format", choices=("text", "json"), default="text")
    oc = sub.add_parser("occurrences", help="occurrences recorded by the scheduler")
    oc.add_argument("--trigger", metavar="ID")
    oc.add_argument("--project", default=None, help="project (default A44_PROJECT or pj_default)")
    oc.add_argument("--database-url", help="PostgreSQL URL (default A44_DATABASE_URL, else the embedded server)")
    oc.add_argument("--limit", type=int, default=200)
    oc.add_argument("--format", choices=("text", "json"), default="text")
    add_target_options(oc)
    return p


def run(args) -> int:
    if args.schedule_cmd == "preview":
        return _preview(args)
    return _occurrences(args)


def _preview(args) -> int:
    from ..app.schedules import preview_schedules
    from ..errors import A44Error
    from .cmd_lint import LintSettings, report
    from .output import exit_code, print_error

    try:
        found = preview_schedules([args.file], args.trigger, args.start, args.end, where=args.file)
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)
    if not found.ok:
        report(LintSettings((args.file,), "text", False, "never"), found.lint.diagnostics, found.lint.files,
               stdout=sys.stdout, stderr=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps({"triggers": found.to_dict()["triggers"]}, indent=2))
    else:
        sys.stdout.write(found.text())
    return 0


def _occurrences(args) -> int:
    import asyncio

    from ..app.database import open_store
    from ..app.schedules import occurrences
    from ..errors import A44Error
    from ..settings import DEFAULT_PROJECT
    from .output import exit_code, goes_remote, print_error, remote_unsupported, settings_of

    project = args.project or settings_of(args).project or DEFAULT_PROJECT
    try:
        if not args.database_url and goes_remote(args):
            raise remote_unsupported("schedule occurrences")
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)

    async def main():
        async with open_store(settings_of(args), args.database_url) as store:
            return await occurrences(store, project, args.trigger, args.limit)

    try:
        rows = asyncio.run(main())
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)
    if args.format == "json":
        print(json.dumps([{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.items()}
                          for r in rows], indent=2))
        return 0
    for r in rows:
        print(f"{r['fire_at'].isoformat()}  {r['occurrence_key']}  {r['status']}"
              f"{'  catch-up' if r['catch_up'] else ''}  {r['run_id'] or ''}".rstrip())
    return 0
