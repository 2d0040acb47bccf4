"""`a44 automation queues stats` — per queue: limits, runs in flight, waiting, age of the oldest waiting message,
DLQ depth (docs/queues.md)."""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import add_common_options, add_target_options, json_document, run_api, service, table, write


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("queues", help="queue gauges: in flight, waiting, oldest message age, DLQ depth",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="queues_cmd", metavar="CMD", required=True)
    s = sub.add_parser("stats", help="one line per queue")
    add_common_options(s)
    add_target_options(s)
    return p


def run(args: argparse.Namespace) -> int:
    return run_api(_queues, args)


async def _queues(auto, args) -> int:
    from ..app.queues import Queues

    rows = await service(auto, "queues", lambda: Queues(auto)).stats()
    if args.format == "json":
        write(json_document({"queues": rows}))
        return EXIT_OK
    write(table(["queue", "ordering", "max", "in_flight", "waiting", "oldest_waiting_s", "dlq_depth"],
                [[r["queue"], r["ordering"], r["max_concurrency"], r["in_flight"], r["waiting"],
                  r["oldest_waiting_age_s"], r["dlq_depth"]] for r in rows]))
    return EXIT_OK
