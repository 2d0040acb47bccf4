"""`a44 automation replay RUN... | --state S --step S --since AGE --workflow WF  (--from-step S | --from-time T)`

Re-executes terminal runs from a cut, reusing the results recorded before it (docs/replay.md).
`--from-step S` invalidates S and every step after it in the DAG; `--from-time T` (ISO 8601 or an age such as
`2h`) invalidates the steps that finished after T; `--failed-partitions` runs again exactly the failed partitions of
fan-out steps (and the steps after them), reusing every other partition's result (docs/partitions.md). Earlier steps' results are read from the log. Each replayed
run starts a new epoch: its earlier attempts stay in `logs`.

`--dry-run` prints the plan as JSON and changes nothing:

    {"matched": 412, "fromStep": "provision-db",
     "perRun": {"reused": ["create-tenant"], "replayed": ["provision-db", "cooldown", "notify-owner"]},
     "estimatedDurationSeconds": 1980, "warnings": ["3 runs in compensation_failed were ignored"]}

Otherwise the runs become pending and the daemons (`a44 automation serve`) run them through the normal queue;
`--rate 10/s` paces how fast they are handed over. Runs in `compensation_failed` are never replayed; runs that
are not terminal cannot be. Interrupting and re-running the same command does not replay a run twice (the
command's request id is recorded on every run it replays). `--to-version N` replays on version N only when the
steps before the cut are identical in both versions. Exit 0, 1 error, 2 usage error.
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import ProgressBar, add_common_options, add_target_options, json_document, remote_admin, run_api, write


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("replay", help="re-run terminal runs from a step or an instant, reusing earlier results",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_ids", nargs="*", metavar="RUN", help="runs to replay (or select with the filters)")
    p.add_argument("--state", metavar="S", help="select runs in this state (e.g. failed)")
    p.add_argument("--step", metavar="S", help="select runs whose current or failed step is S, or that attempted it")
    p.add_argument("--since", metavar="AGE", help="select runs created within this age: 48h, 7d")
    p.add_argument("--workflow", metavar="WF", help="select runs of this workflow (id or name)")
    cut = p.add_mutually_exclusive_group(required=True)
    cut.add_argument("--from-step", metavar="S", help="invalidate S and every step after it")
    cut.add_argument("--from-time", metavar="T", help="invalidate steps that finished after T (ISO 8601 or age)")
    cut.add_argument("--failed-partitions", action="store_true",
                     help="run again only the partitions that failed (and what follows their step), reusing "
                          "every succeeded or skipped partition")
    p.add_argument("--to-version", type=int, metavar="N",
                   help="run on version N (refused unless the steps before the cut are unchanged)")
    p.add_argument("--dry-run", action="store_true", help="print what would be reused and re-run; change nothing")
    p.add_argument("--rate", metavar="N/s", help="hand runs over at most this fast (10/s, 600/min)")
    p.add_argument("--concurrency", type=int, default=16, metavar="N",
                   help="daemon concurrency assumed by the duration estimate (default 16)")
    p.add_argument("--request-id", metavar="ID", help="override the request id derived from the command "
                   "(a new id replays runs this command already replayed)")
    add_common_options(p)
    add_target_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    return run_api(_replay, args)


async def _replay(auto, args) -> int:
    from functools import partial

    from ..app.replay import replay

    run = remote_admin(auto).replay if getattr(auto, "remote", False) else partial(replay, auto)
    doc = await run(args.run_ids, state=args.state, step=args.step, since=args.since, workflow=args.workflow,
                    from_step=args.from_step, from_time=args.from_time,
                    failed_partitions=args.failed_partitions, to_version=args.to_version, dry_run=args.dry_run,
                    rate=args.rate, concurrency=args.concurrency, request_id=args.request_id,
                    progress=ProgressBar("replaying"))
    if args.dry_run or args.format == "json":
        write(json_document(doc))
        return EXIT_OK
    write(f"matched: {doc['matched']}\n")
    for w in doc["warnings"]:
        write(f"warning: {w}\n")
    write(f"replayed: {doc['replayed']}  skipped (already replayed by {doc['requestId']}, or no longer terminal): "
          f"{doc['skipped']}\n")
    return EXIT_OK
