"""`a44 automation versions WF`: each published version of a workflow with its open runs, its oldest open run and
since when it is drained (docs/deploys.md). `a44 automation versions retire WF V [--migrate-to N]` retires a
version: refused with E_VERSION_HAS_OPEN_RUNS (exit 1) while it has open runs, unless --migrate-to moves them to
version N first (as `runs migrate`). A retired version no run ever named is deleted; one that finished runs name
is kept for their history (`kept`). Exit 0, 1 on a refusal, 2 on usage errors."""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import ArgParser, add_common_options, add_target_options, decided_by, json_document, run_api, table, write


class VersionsParser(ArgParser):
    """`versions WF` lists; `versions retire WF V` retires (a first argument other than `retire` is the WF)."""

    VALUED = ("--project", "--format", "-f", "--api-url")     # options before WF that take a value

    def parse_known_args(self, args=None, namespace=None):
        args = list(args or [])
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in self.VALUED else 1
        if i < len(args) and args[i] not in ("list", "retire"):
            args.insert(i, "list")
        return super().parse_known_args(args, namespace)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("versions", help="a workflow's versions with their open runs; retire a drained one",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_options(p)
    add_target_options(p)
    actions = p.add_subparsers(dest="versions_action", metavar="ACTION", parser_class=type(p))
    ls = actions.add_parser("list", help="each version with its open runs (also `versions WF`)")
    ls.add_argument("workflow", metavar="WF", help="workflow id or name")
    add_common_options(ls, inherited=True)
    add_target_options(ls, inherited=True)
    r = actions.add_parser("retire", help="retire a version without open runs (or move them first)")
    r.add_argument("workflow", metavar="WF", help="workflow id or name")
    r.add_argument("version", type=int, metavar="V", help="the version to retire")
    r.add_argument("--migrate-to", type=int, metavar="N", help="move its open runs to version N first")
    r.add_argument("--reason", metavar="TEXT", help="why (recorded in each moved run's log)")
    r.add_argument("--by", metavar="NAME", help="who (default: $USER)")
    add_common_options(r, inherited=True)
    add_target_options(r, inherited=True)
    p.__class__ = VersionsParser
    return p


def run(args: argparse.Namespace) -> int:
    if getattr(args, "versions_action", None) == "retire":
        return run_api(_retire, args)
    if getattr(args, "workflow", None) is None:
        import sys

        from ..errors import EXIT_USAGE

        print("a44 automation versions: give a workflow: versions WF, or versions retire WF V", file=sys.stderr)
        return EXIT_USAGE
    return run_api(_list, args)


async def _list(auto, args) -> int:
    doc = await auto.versions(args.workflow)
    if args.format == "json":
        write(json_document(doc))
        return EXIT_OK
    rows = [(f"v{v['version']}", v["versioning"], str(v["open_runs"]), v["oldest_open_at"] or "-",
             v["drained_since"] or ("-" if v["open_runs"] or not v["runs"] else "?"), v["published_at"])
            for v in doc["versions"]]
    write(table(("VERSION", "VERSIONING", "OPEN", "OLDEST OPEN", "DRAINED SINCE", "PUBLISHED"), rows))
    return EXIT_OK


async def _retire(auto, args) -> int:
    doc = await auto.retire_version(args.workflow, args.version, migrate_to=args.migrate_to, by=decided_by(args.by),
                                    why=args.reason)
    if args.format == "json":
        write(json_document(doc))
    else:
        moved = doc.get("migration")
        if moved:
            write(f"moved to v{moved['to']}: " + ", ".join(f"{n} {k}" for k, n in sorted(moved["counts"].items()))
                  + "\n")
        write(f"{doc['workflow_id']} v{doc['version']} retired ({doc['outcome']})\n")
    return EXIT_OK
