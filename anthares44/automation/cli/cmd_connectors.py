"""`a44 automation connectors list`: the connectors this installation can run, and where each comes from.

Built-ins are listed with the module that implements them, plugins with the distribution (name and version) and
the entry point (`anthares44.automation.connectors`) that provides them. `--format json` prints a JSON array of
`{uses, name, source, value, params}`; `params` lists the fields of the connector's parameter model, when it has
one. A plugin is not imported to be listed, so a broken plugin still shows where it comes from.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import EXIT_OK
from .output import FORMATS, add_target_options, exit_code, goes_remote, print_error, remote_admin, run_api, table


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("connectors", help="list the installed connectors and where they come from",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="connectors_verb", metavar="VERB", required=True)
    ls = verbs.add_parser("list", help="built-in and plugin connectors")
    ls.add_argument("--format", "-f", choices=FORMATS, default="text", help="output format (default: text)")
    ls.add_argument("--project", metavar="P", help="with --remote: the project of the stored login")
    add_target_options(ls)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..app.connectors import installed
    from ..errors import A44Error

    try:
        remote = goes_remote(args)
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)
    if remote:   # the daemon's installation, not this one
        return run_api(_remote, args)
    return _print(args, installed())


async def _remote(auto, args) -> int:
    return _print(args, await remote_admin(auto).connectors())


def _print(args: argparse.Namespace, rows: list[dict]) -> int:
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    sys.stdout.write(table(["USES", "SOURCE", "FROM"], [[r["uses"], r["source"], r.get("value", "")] for r in rows]))
    return EXIT_OK
