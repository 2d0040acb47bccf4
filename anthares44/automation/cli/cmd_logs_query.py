"""`a44 automation logs query ...`: attempts of every run of the project, newest first, filtered; and
`a44 automation logs archive [--dry-run]`: the log retention, once.

    a44 automation logs query --error-code E_UPSTREAM_503 --step reserve-funds --since 7d --limit 500
    STARTED               RUN                         WORKFLOW           STEP           ATTEMPT  STATUS  ERROR ...
    2026-07-19 14:02:11Z  run_01K0H3Q5Z8W6T3N2C4B7D9F1GH  wf_invoice_settle  reserve-funds  1  failed  E_UPSTREAM_503
    (500 rows, truncated at --limit 500; the next page: --after eyJ...)

Filters: --error-code, --step, --partition-key, --workflow (id or name); --since (default 24h) and --until are
ages (7d: seven days ago) or ISO instants. --limit N is 100 by default and at most 10,000: more is refused
(E_LOG_LIMIT), never cut silently. An answer that stops at N says so and prints the cursor of the next page
(`--after CURSOR`; `next` in JSON). `--archive` reads the Parquet days of the cold store instead of PostgreSQL
(rows older than the hot retention, docs/observability.md). `--format json` prints one document, `jsonl` one row
per line (the truncation note then goes to stderr). Exit 0 (even when nothing matches), 1 database or archive
error, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_OK
from .output import (
    ArgParser,
    add_target_options,
    json_document,
    json_line,
    ms,
    run_api,
    settings_of,
    table,
    when,
    write,
)

QUERY_FORMATS = ("text", "json", "jsonl")


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog="a44 automation logs query", description=__doc__,
                  formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--error-code", metavar="E", help="attempts that ended with this error code")
    p.add_argument("--step", metavar="S", help="attempts of this step id")
    p.add_argument("--partition-key", metavar="K", help="attempts of runs with this partition key")
    p.add_argument("--workflow", metavar="WF", help="attempts of runs of this workflow (id or name)")
    p.add_argument("--since", metavar="T", help="started at or after: an age (7d, 36h) or an instant (default 24h)")
    p.add_argument("--until", metavar="T", help="started before: an age or an instant (default now)")
    p.add_argument("--limit", type=int, default=100, metavar="N", help="rows per answer (default 100, at most "
                                                                       "10,000)")
    p.add_argument("--after", metavar="CURSOR", help="the next page of a truncated answer (its `next` cursor)")
    p.add_argument("--archive", action="store_true", help="query the Parquet archive (cold store) instead")
    p.add_argument("--project", metavar="P", help="project id (default: $A44_PROJECT, else pj_default)")
    p.add_argument("--format", "-f", choices=QUERY_FORMATS, default="text", help="output format (default: text)")
    add_target_options(p)
    p.set_defaults(logs_action="query", _run=run)
    return p


def build_archive_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog="a44 automation logs archive",
                  description="Run the log retention once, as the daemon does daily: write the Parquet days of "
                              "attempts older than the hot retention (A44_LOG_HOT_DAYS, default 30), drop the month "
                              "partitions fully archived, delete old runs and events in bounded batches, and delete "
                              "archive days older than A44_LOG_ARCHIVE_MONTHS (default 13). --dry-run says what "
                              "it would do. Exit 0, 1 database or archive error.")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--project", metavar="P", help=argparse.SUPPRESS)
    p.add_argument("--format", "-f", choices=("text", "json"), default="text", help="output format (default: text)")
    p.set_defaults(logs_action="archive", _run=run)
    return p


def run(args: argparse.Namespace) -> int:
    return run_api(_archive if args.logs_action == "archive" else _query, args)


async def _query(auto, args) -> int:
    page = await auto.query_logs(error_code=args.error_code, step=args.step, workflow=args.workflow,
                                 partition_key=args.partition_key, since=args.since, until=args.until,
                                 limit=args.limit, after=args.after, archive=args.archive)
    if args.format == "json":
        write(json_document(page.to_dict()))
    elif args.format == "jsonl":
        write("".join(json_line(r) for r in page.rows))
        if page.truncated:
            print(f"a44: {truncation_note(page)}", file=sys.stderr)
    else:
        write(render_text(page))
    return EXIT_OK


def truncation_note(page) -> str:
    return (f"{len(page.rows)} rows, truncated at --limit {page.limit}; the next page: --after {page.next}")


def render_text(page) -> str:
    if not page.rows:
        return "(no attempts match)\n"
    rows = [(when(r["started_at"]), r["run_id"], r["workflow_id"], r["step_id"], r["attempt"], r["status"],
             r["error_code"], ms(r["duration_ms"]), r["partition_key"]) for r in page.rows]
    out = table(("started", "run", "workflow", "step", "attempt", "status", "error", "duration", "partition"), rows)
    return out + (f"({truncation_note(page)})\n" if page.truncated else f"({len(page.rows)} rows)\n")


async def _archive(auto, args) -> int:
    from ..app.logs import archive_logs

    report = await archive_logs(auto.store, auto.archive_dir, settings_of(args), dry_run=args.dry_run)
    if args.format == "json":
        write(json_document(report.to_dict()))
    else:
        write(render_retention(report))
    return EXIT_OK


def render_retention(report) -> str:
    if report.skipped:
        return "retention is running in another process (advisory lock held); nothing done\n"
    verb = "would " if report.dry_run else ""
    days = report.archived_days
    out = [f"hot rows before {when(report.hot_cutoff)}"]
    out.append(f"{verb}archive {len(days)} day(s), {sum(d['rows'] for d in days)} attempt(s)"
               + (f": {days[0]['day']} .. {days[-1]['day']}" if days else ""))
    out.append(f"{verb}drop {len(report.dropped_months)} month partition(s)"
               + (": " + ", ".join(m["partition"] for m in report.dropped_months) if report.dropped_months else ""))
    if not report.dry_run:
        out.append(f"deleted {report.deleted_runs} run(s) with their events")
    out.append(f"{verb}delete {len(report.deleted_archive_days)} archive day(s) past the cold retention")
    return "\n".join(out) + "\n"
