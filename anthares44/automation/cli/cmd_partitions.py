"""`a44 automation partitions WF|RUN [--state S] [--partition P] [--step S] [--limit N] [--cursor C]`: the
partitions of fan-out steps (docs/partitions.md), the answer to "was partition P processed, when, by which run,
with how many rows".

RUN (`run_...`) lists that run's partitions in order, a page of --limit at a time, with the run's totals
(partitions in all, failed for good); the last line gives the --cursor of the next page. WF (an id or a name)
lists the partitions of its runs, newest run first. Prints the counts per state, then a table: RUN, STEP,
PARTITION, STATE, ATTEMPTS, ROWS (in/out/error), ERROR, FINISHED, and SKIPPED BY when a person skipped one.
States: pending, running, success, retrying, failed, timeout, skipped. Exit 0 (even when nothing matches), 1 error (no such run), 2 usage error.
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import add_common_options, add_target_options, json_document, run_api, table, when, write


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("partitions", help="list the partitions of a run or a workflow with their state",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="WF|RUN", help="a run id (run_...) or a workflow id or name")
    p.add_argument("--state", metavar="S", help="only partitions in this state (e.g. failed, timeout, skipped)")
    p.add_argument("--partition", metavar="P", help="only this partition key (e.g. 2026-07-04)")
    p.add_argument("--step", metavar="S", help="only the partitions of this step")
    p.add_argument("--limit", type=int, default=1000, metavar="N", help="rows to print (default 1000)")
    p.add_argument("--cursor", metavar="C", help="a run's next page: the cursor the page before printed")
    add_common_options(p)
    add_target_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    return run_api(_list, args)


async def _list(auto, args) -> int:
    doc = await auto.partitions(args.target, state=args.state, partition=args.partition, step=args.step,
                                limit=args.limit, cursor=args.cursor)
    write(json_document(doc) if args.format == "json" else render_text(doc))
    return EXIT_OK


def _rows(rows) -> str | None:
    if not isinstance(rows, dict):
        return None
    return "/".join(str(rows.get(k, "-")) for k in ("in", "out", "error"))


def render_text(doc: dict) -> str:
    counts = "  ".join(f"{k}: {v}" for k, v in sorted(doc["counts"].items()))
    out = f"{doc['target']}  {counts or 'no partitions'}\n"
    if doc.get("total") is not None:
        out += (f"{doc['total']} partition(s) in all, {doc['failed']} failed for good; "
                f"this page: {len(doc['partitions'])}\n")
    if not doc["partitions"]:
        return out
    if doc.get("next"):
        return out + _table(doc) + f"next page: --cursor {doc['next']}\n"
    return out + _table(doc)


def _table(doc: dict) -> str:
    skipped = any(p["skipped_by"] for p in doc["partitions"])
    head = ("run", "step", "partition", "state", "attempts", "rows", "error", "finished") + (
        ("skipped by",) if skipped else ())
    rows = [(p["run_id"], p["step_id"], p["partition"], p["state"], p["attempts"], _rows(p["rows"]),
             p["error_code"], when(p["finished_at"]))
            + ((f"{p['skipped_by']}: {p['skip_reason']}" if p["skipped_by"] else None,) if skipped else ())
            for p in doc["partitions"]]
    return table(head, rows)
