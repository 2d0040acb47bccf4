"""`a44 automation flow list | pause KEY --until ISO [--reason TEXT] [--by NAME] | resume KEY [--by NAME] |
buffers [--workflow WF]` — paused flow keys and debounce / batch buffers (docs/flow.md). An upstream 429 (or 503
with Retry-After) pauses its connector's key for every run on its own; these verbs show the keys paused now,
pause one by hand and resume one; `buffers` shows the open buffers of debounced / batched workflows (their
events, and when and why each will start its run).

    a44 automation flow list
    a44 automation flow pause http:pj_checkout_prod:api.erp.example --until 2026-07-19T15:00:00Z \\
        --reason "ERP maintenance window"
    a44 automation flow resume http:pj_checkout_prod:api.erp.example
    a44 automation flow buffers --workflow doc-sync

Pausing sets the key's end whatever pause it had (longer or shorter); resuming ends it now. Either way the runs
released until a later end are due at the new one (`woken`). Who and why stay on the key's row (`--by`: default
the login name; over --remote, the token's name). Exit 0, 1 error (E_FLOW_KEY_NOT_FOUND: the key is not paused),
2 usage (E_FLOW_PAUSE_INVALID: a bad key or --until).
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import (
    add_common_options,
    add_target_options,
    decided_by,
    json_document,
    run_api,
    service,
    table,
    when,
    write,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("flow", help="paused flow keys: list, pause, resume; open buffers", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="flow_cmd", metavar="CMD", required=True)
    ls = sub.add_parser("list", help="the keys paused now, the soonest to end first")
    add_common_options(ls)
    add_target_options(ls)
    pa = sub.add_parser("pause", help="pause a key until an instant")
    pa.add_argument("key", metavar="KEY")
    pa.add_argument("--until", metavar="ISO", required=True, help="ISO 8601 instant with a UTC offset (within 30 days)")
    pa.add_argument("--reason", metavar="TEXT", help="why, kept on the key's row")
    pa.add_argument("--by", metavar="NAME", help="who (default: the login name)")
    add_common_options(pa)
    add_target_options(pa)
    bu = sub.add_parser("buffers", help="the open debounce / batch buffers, oldest first")
    bu.add_argument("--workflow", metavar="WF", help="only this workflow's buffers")
    add_common_options(bu)
    add_target_options(bu)
    rs = sub.add_parser("resume", help="end a key's pause now; its waiting runs go at once")
    rs.add_argument("key", metavar="KEY")
    rs.add_argument("--by", metavar="NAME", help="who (default: the login name)")
    add_common_options(rs)
    add_target_options(rs)
    return p


def run(args: argparse.Namespace) -> int:
    return run_api(_flow, args)


async def _flow(auto, args) -> int:
    from ..app.flow import Flow

    f = service(auto, "flow", lambda: Flow(auto))
    if args.flow_cmd == "list":
        rows = await f.list()
        if args.format == "json":
            write(json_document({"keys": rows}))
        else:
            write(table(["key", "paused_until", "source", "by", "reason"],
                        [[r["key"], when(r["paused_until"]), r["source"], r["paused_by"] or "-", r["reason"] or "-"]
                         for r in rows]))
        return EXIT_OK
    if args.flow_cmd == "buffers":
        bufs = await f.buffers(args.workflow)
        if args.format == "json":
            write(json_document({"buffers": bufs}))
        else:
            write(table(["buffer", "workflow", "kind", "key", "events", "bytes", "first", "due", "for"],
                        [[b["buffer_id"], b["workflow_id"], b["kind"], b["key"] or "-", str(b["events"]),
                          str(b["bytes"]), when(b["first_at"]), when(b["due_at"]), b["due_for"]] for b in bufs]))
        return EXIT_OK
    by = decided_by(args.by)
    if args.flow_cmd == "pause":
        doc = await f.pause(args.key, until=args.until, by=by, reason=args.reason)
        said = f"{doc['key']} paused until {when(doc['paused_until'])}"
    else:
        doc = await f.resume(args.key, by=by)
        said = f"{doc['key']} resumed"
    if args.format == "json":
        write(json_document(doc))
    else:
        write(f"{said}; {doc['woken']} waiting runs woken\n")
    return EXIT_OK
