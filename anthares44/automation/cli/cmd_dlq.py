"""`a44 automation dlq list [Q] [--limit N] | stats Q [--since 24h] | show ID [--with-attempts] | redrive Q
[--filter CEL] [--rate 20/s] [--max N] [--dry-run]` — the dead-letter queue (docs/queues.md): every
dead letter, whether a run failed for good, an envelope was invalid or an event was older than its trigger's maxAge.

    a44 automation dlq list --limit 20
    a44 automation dlq stats q_invoice_settle --since 24h
    a44 automation dlq show dlq_01J9YB2C --with-attempts
    a44 automation dlq redrive q_invoice_settle --filter "error_code == 'E_UPSTREAM_503'" --rate 20/s --max 5000

The filter is CEL over the DLQ row: error_code, error_message, step_id, data, envelope, attempts, history, queue,
workflow_id, trigger_id, event_id, run_id, partition_key, created_at, age_seconds. Nothing leaves the DLQ by
itself; a redrive re-enqueues the original envelope as a new run linked to its entry, and never redrives an entry
twice (run the same command again after an interruption). Exit 0, 1 error, 2 usage (bad filter, rate, max).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import E_DLQ_FILTER, E_INVALID_ARGUMENT, EXIT_OK, EXIT_USAGE
from .output import (
    ProgressBar,
    add_common_options,
    add_target_options,
    json_document,
    run_api,
    service,
    table,
    when,
    write,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("dlq", help="inspect and redrive the dead-letter queue", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="dlq_cmd", metavar="CMD", required=True)
    ls = sub.add_parser("list", help="dead letters newest first, of every queue or of Q")
    ls.add_argument("queue", metavar="Q", nargs="?")
    ls.add_argument("--limit", type=int, default=50)
    add_common_options(ls)
    add_target_options(ls)
    s = sub.add_parser("stats", help="dead letters of a queue by error code")
    s.add_argument("queue", metavar="Q")
    s.add_argument("--since", metavar="AGE", help="only those dead-lettered within AGE (24h, 7d)")
    add_common_options(s)
    add_target_options(s)
    sh = sub.add_parser("show", help="one dead letter: envelope, last error, attempts")
    sh.add_argument("dead_letter_id", metavar="ID")
    sh.add_argument("--with-attempts", action="store_true", help="every delivery and its step attempts")
    add_common_options(sh)
    add_target_options(sh)
    r = sub.add_parser("redrive", help="re-enqueue dead letters of a queue")
    r.add_argument("queue", metavar="Q")
    r.add_argument("--filter", metavar="CEL", help="CEL over the DLQ row, e.g. \"error_code == 'E_UPSTREAM_503'\"")
    r.add_argument("--rate", metavar="N/s", help="at most this many per second (20/s, 600/m)")
    r.add_argument("--max", type=int, metavar="N", help="at most N entries")
    r.add_argument("--dry-run", action="store_true", help="count and list what would be redriven; change nothing")
    add_common_options(r)
    add_target_options(r)
    return p


def run(args: argparse.Namespace) -> int:
    return run_api(_dlq, args)


async def _dlq(auto, args) -> int:
    from ..app.queues import Queues
    from ..errors import A44Error
    from .output import print_error

    q = service(auto, "queues", lambda: Queues(auto))
    try:
        if args.dlq_cmd == "list":
            rows = await q.dlq_list(args.queue, limit=args.limit)
            if args.format == "json":
                write(json_document({"dead_letters": rows}))
            else:
                write(table(("id", "queue", "trigger", "event", "error", "at"),
                            [(r["dead_letter_id"], r["queue"] or "-", r["trigger_id"] or "-", r["event_id"] or "-",
                              r["error_code"], when(r["created_at"])) for r in rows]))
            return EXIT_OK
        if args.dlq_cmd == "stats":
            doc = await q.dlq_stats(args.queue, since=args.since)
            if args.format == "json":
                write(json_document(doc))
                return EXIT_OK
            write(f"{doc['queue']}: {doc['total']} dead letter(s)" + (f" since {doc['since']}" if doc["since"] else "")
                  + "\n")
            if doc["by_error_code"]:
                write(table(["error_code", "count", "waiting", "first_seen", "last_seen"],
                            [[g["error_code"], g["count"], g["waiting"], when(g["first_seen"]), when(g["last_seen"])]
                             for g in doc["by_error_code"]]))
            return EXIT_OK
        if args.dlq_cmd == "show":
            doc = await q.dlq_show(args.dead_letter_id, with_attempts=args.with_attempts)
            if args.format == "json":
                write(json_document(doc))
                return EXIT_OK
            e = doc["last_error"]
            write(f"{doc['dead_letter_id']}  queue {doc['queue']}  workflow {doc['workflow_id'] or '-'}  "
                  f"deliveries {doc['attempts']}  {when(doc['created_at'])}\n")
            write(f"last error: {e['code']} {e['message'] or ''}" + (f" (step {e['step']})" if e["step"] else "") + "\n")
            if doc["redriven_at"]:
                write(f"redriven at {when(doc['redriven_at'])} as {doc['redriven_run_id'] or '-'}\n")
            write(f"envelope: {doc['envelope']}\n")
            for d in doc.get("history", []):
                write(f"delivery {d['delivery']}  {d['run_id']}  {d['state']}  {d.get('error_code') or ''}\n")
                for a in d["attempts"]:
                    write(f"  {a['step_id']:<20} {a['kind']:<12} #{a['attempt']:<3} {a['status']:<14} "
                          f"{a.get('error_code') or '':<18} {when(a['started_at'])}\n")
            return EXIT_OK
        bar = ProgressBar("redriving")
        report = await q.dlq_redrive(args.queue, filter=args.filter, rate=args.rate, max=args.max,
                                     dry_run=args.dry_run, progress=bar)
        bar.end()
        doc = report.to_dict()
        if args.format == "json":
            write(json_document(doc))
            return EXIT_OK
        verb = "would redrive" if report.dry_run else "redriven"
        write(f"{report.queue}: scanned {report.scanned}, matched {report.matched}, {verb} "
              f"{report.matched if report.dry_run else report.redriven}"
              + ("" if report.dry_run else f", dead-lettered again {report.dead_lettered_again}, "
                 f"taken by another redrive {report.skipped_taken}, in {report.elapsed_s:.1f}s") + "\n")
        return EXIT_OK
    except A44Error as exc:
        if exc.code in (E_DLQ_FILTER, E_INVALID_ARGUMENT):
            if exc.code == E_DLQ_FILTER and args.format == "json":
                write(json_document({"error": {**exc.to_dict(), **(exc.details or {})}}))
            else:
                for d in (exc.details or {}).get("diagnostics", []):
                    print(f"--filter:1:{d['column']}: {d['code']} {d['message']}", file=sys.stderr)
                print_error(exc)
            return EXIT_USAGE
        raise
