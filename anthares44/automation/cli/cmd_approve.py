"""`a44 automation approve RUN --step S --decision approve|reject [--comment TEXT]`

Decides on a run's approval step (docs/approvals.md) as you: `local:<os user>` on the local database, the API
token's name with --remote. Refused: a person not in the step's approver groups (E_NOT_APPROVER), the run's
initiator approving its own run (E_SELF_APPROVAL, unless the step has `allowSelf`), a request that is closed
(E_APPROVAL_CLOSED: decided, timed out, cancelled). Deciding twice answers your first decision (`duplicate`).
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import add_common_options, add_target_options, json_document, run_api, write


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("approve", help="approve or reject a run's approval step",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_id", metavar="RUN", help="the run")
    p.add_argument("--step", required=True, metavar="S", help="the approval step's id")
    p.add_argument("--decision", required=True, choices=("approve", "reject"), help="approve or reject")
    p.add_argument("--comment", metavar="TEXT", help="why (at most 4000 characters), kept in the audit")
    add_common_options(p)
    add_target_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    return run_api(_approve, args)


async def _approve(auto, args) -> int:
    from ..app.approvals import local_person

    result = await auto.approve(args.run_id, args.step, args.decision, person=local_person(), via="cli",
                                comment=args.comment)
    if args.format == "json":
        write(json_document(result))
    else:
        what = {"recorded": f"recorded ({result['approvals']} of {result['needed']} approvals)",
                "approved": "approved: the step goes on", "rejected": "rejected: the step fails",
                "duplicate": f"you decided before ({result['decision']}); nothing new recorded"}[result["outcome"]]
        write(f"{args.run_id} step {args.step}: {result['person']} {args.decision}: {what}\n")
    return EXIT_OK
