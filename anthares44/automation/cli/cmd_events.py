"""`a44 automation events publish|list|show`: the event bus (docs/events.md).

    a44 automation events publish --type billing.refund.requested --data '{"amountCents": 900000}' \\
        --idempotency-key refund:rf_1:requested:v1 [--partition-key cust_4471] [--occurred-at ISO] [--id evt_…]

Prints the event id, `created` or `deduplicated (key age …)`, and what each subscribed trigger did with it
(`created run_…`, `deduplicated run_…`, `dropped` / `filtered` by its filter, `dead_lettered` E_EVENT_TOO_OLD:
`a44 automation dlq list` shows those). `--id evt_…` gives the event its id: publishing it again with the same
envelope is the same event (`deduplicated`, nothing written), with another envelope E_EVENT_ID_CONFLICT.
"""

from __future__ import annotations

import argparse
import json

from ..errors import EXIT_OK
from .output import add_common_options, add_target_options, json_document, run_api, table, usage_error, when, write


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("events", help="publish and inspect bus events", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="events_verb", metavar="VERB")
    verbs.required = True
    pub = verbs.add_parser("publish", help="publish an event")
    pub.add_argument("--type", required=True)
    pub.add_argument("--data", required=True, help="the event data as JSON (or @file.json)")
    pub.add_argument("--idempotency-key", default=None)
    pub.add_argument("--partition-key", default=None)
    pub.add_argument("--occurred-at", default=None, help="ISO 8601 with offset (default now)")
    pub.add_argument("--id", dest="event_id", default=None, metavar="EVT",
                     help="the event's own id (evt_ + 1..120 of A-Z a-z 0-9 _ -; default a new evt_<ULID>): "
                          "the same id with the same envelope is the same event")
    add_common_options(pub)
    add_target_options(pub)
    lst = verbs.add_parser("list", help="recent events")
    lst.add_argument("--type", default=None)
    lst.add_argument("--limit", type=int, default=50)
    add_common_options(lst)
    add_target_options(lst)
    show = verbs.add_parser("show", help="one event: envelope and deliveries")
    show.add_argument("event_id", metavar="EVENT")
    add_common_options(show)
    add_target_options(show)
    return p


def run(args) -> int:
    if args.events_verb == "publish":
        text = args.data
        if text.startswith("@"):
            try:
                text = open(text[1:], encoding="utf-8").read()
            except OSError as exc:
                return usage_error(f"cannot read {text[1:]}: {exc.strerror}")
        try:
            args.data_value = json.loads(text)
        except ValueError as exc:
            return usage_error(f"--data is not JSON: {exc}")
        if not args.idempotency_key:
            return usage_error("an event needs --idempotency-key",
                               "derive it from the data, e.g. invoice:inv_8812:finalized:v1")
    return run_api({"publish": _publish, "list": _list, "show": _show}[args.events_verb], args,
                   migrate=True)


def result_text(result) -> str:
    head = "created" if result.created else f"deduplicated (key age {result.key_age_seconds:.1f}s)"
    out = f"{result.event_id}  {result.type}  {head}\n"
    for d in result.deliveries:
        out += f"  {d['trigger_id']}  {d['outcome']}" + (f" {d['run_id']}" if d.get("run_id") else "") + "\n"
    if result.created and not result.deliveries:
        out += "  (no trigger subscribes to this type)\n"
    return out


async def _publish(auto, args) -> int:
    from ..app.ingestion import ingestion_for

    result = await ingestion_for(auto).publish_event(args.type, args.data_value, args.idempotency_key,
                                                 partition_key=args.partition_key, occurred_at=args.occurred_at,
                                                 event_id=args.event_id)
    write(json_document(result.to_dict()) if args.format == "json" else result_text(result))
    return EXIT_OK


async def _list(auto, args) -> int:
    from ..app.ingestion import ingestion_for

    rows = await ingestion_for(auto).events(type=args.type, limit=args.limit)
    if args.format == "json":
        write(json_document({"events": rows}))
    else:
        write(table(("event", "type", "key", "partition", "received"),
                    [(r["event_id"], r["type"], r["idempotency_key"], r["partition_key"] or "-",
                      when(r["received_at"])) for r in rows]))
    return EXIT_OK


async def _show(auto, args) -> int:
    from ..app.ingestion import ingestion_for

    doc = await ingestion_for(auto).event(args.event_id)
    if args.format == "json":
        write(json_document(doc))
    else:
        write(json.dumps(doc["envelope"], indent=2, ensure_ascii=False) + "\n")
        for d in doc["deliveries"]:
            write(f"  {d['trigger_id']}  {d['outcome']}" + (f" {d['run_id']}" if d.get("run_id") else "") + "\n")
    return EXIT_OK

