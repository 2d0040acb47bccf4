"""`a44 automation approvals [--mine] [--overdue] [--limit N]`

What waits for whom (docs/approvals.md): the open approval requests of the project, oldest first, each with who
may decide, the approvals so far and its timeout. --mine: only those you may decide and have not (you are
`local:<os user>` locally, the API token's name with --remote); --overdue: only those past their first reminder
(or escalation).
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import add_common_options, add_target_options, json_document, run_api, write


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("approvals", help="list the approvals that wait for a decision",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mine", action="store_true", help="only those you may decide and have not")
    p.add_argument("--overdue", action="store_true", help="only those past their first reminder")
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100, at most 1000)")
    add_common_options(p)
    add_target_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    return run_api(_approvals, args)


async def _approvals(auto, args) -> int:
    from ..app.approvals import local_person

    rows = await auto.approvals(person=local_person() if args.mine else None, overdue=args.overdue,
                                limit=max(1, min(args.limit, 1000)))
    if args.format == "json":
        write(json_document({"approvals": rows}))
        return EXIT_OK
    if not rows:
        write("no approval waits" + (" for you" if args.mine else "") + "\n")
        return EXIT_OK
    for r in rows:
        who = ", ".join(r["deciders"]) or "nobody (no member in its groups)"
        write(f"{r['run_id']}  {r['workflow_id']}  step {r['step_id']}  {r['approvals']}/{r['min_approvals']} "
              f"approvals  until {r['timeout_at']}  deciders: {who}\n")
    return EXIT_OK
