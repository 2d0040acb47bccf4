"""`a44 automation metrics` — the values `GET /metrics` exposes, read from the database without a Prometheus server:
queue depths and ages, DLQ depth, runs by state, step attempts and durations, lease re-grants, breakers, webhook
rejections and filter misses of every process (docs/metrics.md)."""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import add_target_options, json_document, remote_admin, run_api, table, write


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("metrics", help="the metrics of GET /metrics, as a table or JSON",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--format", "-f", choices=("table", "text", "json"), default="table",
                   help="output format (default: table; text is the same table)")
    p.add_argument("--name", metavar="PREFIX", help="only the samples whose name starts with PREFIX")
    p.set_defaults(project=None)
    add_target_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    return run_api(_metrics, args)


async def _metrics(auto, args) -> int:
    from ..app.metrics import as_rows, collect

    if getattr(auto, "remote", False):
        rows = await remote_admin(auto).metrics(args.name)
    else:
        rows = [r for r in as_rows(await collect(auto.store)) if not args.name or r["name"].startswith(args.name)]
    if args.format == "json":
        write(json_document({"metrics": rows}))
        return EXIT_OK
    write(table(["name", "labels", "value"],
                [[r["name"], ",".join(f"{k}={v}" for k, v in r["labels"].items()), _number(r["value"])]
                 for r in rows]))
    return EXIT_OK


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
