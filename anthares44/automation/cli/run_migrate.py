"""`a44 automation runs migrate --workflow WF --to N [--from V ...] [--filter CEL] [--rate 50/s] [--dry-run]
[--allow-reexecute] [--reason TEXT] [--by NAME]`: move open runs of older versions to version N (docs/deploys.md).

Each run is classified again under its row lock and moved unless blocked; a run a worker holds is left alone and
tried again, never moved under it. Prints one line per run that did not move and the counts; `--format json`
lists every run with its mapping. Exit 0 when every selected run moved (or would, with --dry-run), 1 when one is
blocked, held or refused, 2 on usage errors."""

from __future__ import annotations

import argparse

from ..errors import EXIT_ERROR, EXIT_OK
from .output import add_common_options, add_target_options, decided_by, json_document, write

OK_OUTCOMES = {"moved", "would_move", "already", "finished"}


def add_migrate(actions) -> argparse.ArgumentParser:
    m = actions.add_parser("migrate", help="move open runs of older versions to a newer version, audited",
                           description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("--workflow", dest="migrate_workflow", required=True, metavar="WF", help="workflow id or name")
    m.add_argument("--to", dest="migrate_to", required=True, type=int, metavar="N", help="the published version")
    m.add_argument("--from", dest="migrate_from", type=int, action="append", metavar="V",
                   help="only runs of version V (repeatable; default: every older version)")
    m.add_argument("--filter", dest="migrate_filter", metavar="CEL",
                   help="only runs this CEL selects, over `input` and `run` (run_id, version, state, created_at)")
    m.add_argument("--rate", dest="migrate_rate", metavar="R", help="at most R runs moved a second: 50/s, 600/m")
    m.add_argument("--dry-run", action="store_true", help="classify under each run's lock; move nothing")
    m.add_argument("--allow-reexecute", action="store_true",
                   help="move runs whose completed steps the new version would run again (listed per run)")
    m.add_argument("--reason", dest="migrate_reason", metavar="TEXT", help="why (recorded in each run's log)")
    m.add_argument("--by", metavar="NAME", help="who moves them (default: $USER)")
    add_common_options(m, inherited=True)
    add_target_options(m, inherited=True)
    return m


async def migrate(auto, args) -> int:
    doc = await auto.migrate_runs(args.migrate_workflow, args.migrate_to, from_versions=args.migrate_from,
                                  filter=args.migrate_filter, rate=args.migrate_rate, dry_run=args.dry_run,
                                  allow_reexecute=args.allow_reexecute, by=decided_by(args.by),
                                  why=args.migrate_reason)
    if args.format == "json":
        write(json_document(doc))
    else:
        write(render_text(doc))
    return EXIT_OK if all(r["outcome"] in OK_OUTCOMES for r in doc["runs"]) else EXIT_ERROR


def render_text(doc: dict) -> str:
    out = []
    for r in doc["runs"]:
        again = r.get("reexecute") or []
        if r["outcome"] in ("moved", "would_move") and not again:
            continue
        line = f"{r['run_id']} v{r['from']} {r['outcome']}"
        if again:
            line += f" (runs again: {', '.join(again)})"
        reasons = [x["message"] for x in r.get("reasons", []) if x["class"] == "blocked"]
        detail = "; ".join(reasons) or r.get("detail")
        out.append(line + (f": {detail}" if detail else ""))
    counts = ", ".join(f"{n} {k}" for k, n in sorted(doc["counts"].items())) or "no open run selected"
    verb = "would move to" if doc["dry_run"] else "to"
    out.append(f"{doc['workflow_id']} {verb} v{doc['to']}: {counts}")
    return "\n".join(out) + "\n"
