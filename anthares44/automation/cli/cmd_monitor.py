"""`a44 monitor ...`: alert rules and the alerts they raise (docs/alerts.md), the notification channels they go to
and the notifications themselves (cmd_channels.py, docs/notifications.md).

    a44 monitor alert create --name dlq-invoice-settle --metric automation.dlq_depth \\
        --filter 'queue="q_invoice_settle"' --condition "min_over_time(10m) > 0" --severity p2 --notify squad-billing
    a44 monitor alert list | show NAME | rm NAME
    a44 monitor alert test NAME          # the verdict per series now, from the stored samples; sends nothing
    a44 monitor alert builtin --notify CH [--escalate-to CH]   # where the built-in alerts go
    a44 monitor alerts [--state firing|resolved] [--limit N]  # alerts with their history
    a44 monitor channel create|list|show|rm|test ...           # where notifications go
    a44 monitor notifications [--state S] | show ID | retry ID  # what was sent, is waiting or failed

Exit 0, 1 error (database, unknown rule), 2 usage (unknown metric or channel, bad filter or condition).
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import (
    ArgParser,
    add_common_options,
    add_target_options,
    json_document,
    run_api,
    service,
    table,
    when,
    write,
)


def add_group(top) -> None:
    mon = top.add_parser("monitor", help="alert rules, alerts, notification channels and notifications",
                         description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = mon.add_subparsers(dest="monitor_verb", metavar="VERB", parser_class=ArgParser)
    verbs.required = True
    from . import cmd_channels

    cmd_channels.add_verbs(verbs)
    alert = verbs.add_parser("alert", help="create, list, show, test or remove alert rules")
    av = alert.add_subparsers(dest="alert_verb", metavar="VERB", parser_class=ArgParser)
    av.required = True

    create = av.add_parser("create", help="create or replace an alert rule")
    create.add_argument("--name", required=True)
    create.add_argument("--metric", required=True, help="e.g. automation.dlq_depth (docs/alerts.md lists them)")
    create.add_argument("--filter", default="", metavar="MATCHERS",
                        help='label matchers, comma-separated: queue="q_invoice_settle", workflow!="wf_x"')
    create.add_argument("--condition", required=True,
                        help='e.g. "min_over_time(10m) > 0", "rate(5m) >= 0.5", "> 100" (the last value)')
    _routing(create)
    create.set_defaults(_run=_body(_create))

    builtin = av.add_parser("builtin", help="where the built-in alerts (failed runs, DLQ growth...) go")
    _routing(builtin, default_severity="p2")
    builtin.set_defaults(_run=_body(_builtin))

    for verb, helptext, fn in (("list", "the project's rules", _list), ("show", "one rule", _show),
                               ("rm", "remove a rule (its firing alerts resolve)", _rm),
                               ("test", "evaluate a rule now against the stored samples; sends nothing", _test)):
        p = av.add_parser(verb, help=helptext)
        if verb != "list":
            p.add_argument("name", metavar="NAME")
        add_common_options(p)
        add_target_options(p)
        p.set_defaults(_run=_body(fn))

    alerts = verbs.add_parser("alerts", help="firing and resolved alerts with their history")
    alerts.add_argument("--state", choices=("firing", "resolved"))
    alerts.add_argument("--limit", type=int, default=50)
    add_common_options(alerts)
    add_target_options(alerts)
    alerts.set_defaults(_run=_body(_alerts))


def _routing(p, default_severity: str = "p3") -> None:
    p.add_argument("--severity", default=default_severity, choices=("p1", "p2", "p3", "p4"),
                   help=f"p1 (most urgent) .. p4 (default {default_severity})")
    p.add_argument("--notify", metavar="CHANNEL", help="the channel its messages go to (a44 monitor channel)")
    p.add_argument("--escalate-to", metavar="CHANNEL",
                   help="where it escalates at p1 when the suppression window ends still firing "
                        "(default: the --notify channel)")
    p.add_argument("--suppress-window", metavar="DURATION", help="the suppression window (default 10m)")
    p.add_argument("--update-every", type=int, metavar="N",
                   help="one update message every N occurrences within the window (default 10)")
    add_common_options(p)
    add_target_options(p)


def _body(fn):
    def run(args) -> int:
        return run_api(fn, args)
    return run


def _alerts_api(auto, args):
    from ..app.alerts import Alerts, sampling_interval
    from .output import settings_of

    seconds = sampling_interval(settings_of(args).alert_interval)
    return service(auto, "alerts", lambda: Alerts(auto, interval_s=seconds))


def _rule_line(r: dict) -> str:
    flt = "{" + r["filter"] + "}" if r["filter"] else ""
    route = r["notify"] or "(no channel: logged)"
    if r["escalate_to"]:
        route += f", escalates to {r['escalate_to']}"
    if r["metric"] == "builtin":
        return f"built-in alerts -> {route} ({r['severity']})"
    return f"{r['name']}: {r['metric']}{flt} {r['condition']} -> {route} ({r['severity']})"


async def _create(auto, args) -> int:
    doc = await _alerts_api(auto, args).create(
        args.name, metric=args.metric, filter=args.filter, condition=args.condition, severity=args.severity,
        notify=args.notify, escalate_to=args.escalate_to, suppress_window=args.suppress_window,
        update_every=args.update_every)
    return _done(args, doc)


async def _builtin(auto, args) -> int:
    doc = await _alerts_api(auto, args).builtin(notify=args.notify, escalate_to=args.escalate_to,
                                                severity=args.severity, suppress_window=args.suppress_window,
                                                update_every=args.update_every)
    return _done(args, doc)


def _done(args, doc: dict) -> int:
    if args.format == "json":
        write(json_document(doc))
    else:
        write(f"{doc['outcome']} alert rule {_rule_line(doc)}\n")
    return EXIT_OK


async def _list(auto, args) -> int:
    from ..grammar.alert_rules import window_text

    rows = await _alerts_api(auto, args).list()
    if args.format == "json":
        write(json_document({"rules": rows}))
        return EXIT_OK
    write(table(["name", "metric", "filter", "condition", "severity", "notify", "escalate_to", "window", "every"],
                [[r["name"], r["metric"], r["filter"], r["condition"], r["severity"], r["notify"], r["escalate_to"],
                  window_text(r["suppress_window_s"]), r["update_every"]] for r in rows]))
    return EXIT_OK


async def _show(auto, args) -> int:
    from ..grammar.alert_rules import window_text

    r = await _alerts_api(auto, args).show(args.name)
    if args.format == "json":
        write(json_document(r))
        return EXIT_OK
    write(_rule_line(r) + "\n")
    write(f"suppression: window {window_text(r['suppress_window_s'])}, an update every {r['update_every']} "
          f"occurrences; from {r['origin']}, updated {when(r['updated_at'])}\n")
    return EXIT_OK


async def _rm(auto, args) -> int:
    await _alerts_api(auto, args).rm(args.name)
    if args.format == "json":
        write(json_document({"removed": args.name}))
    else:
        write(f"removed alert rule {args.name}\n")
    return EXIT_OK


async def _test(auto, args) -> int:
    doc = await _alerts_api(auto, args).test(args.name)
    if args.format == "json":
        write(json_document(doc))
        return EXIT_OK
    verdict = "FIRING" if doc["firing"] else "ok"
    write(f"{doc['rule']}: {doc['metric']} {doc['condition']}: {verdict} (nothing sent)\n")
    if not doc["series"]:
        write("  no series matches the filter yet (the daemon samples every interval)\n")
    for s in doc["series"]:
        labels = ", ".join(f'{k}="{v}"' for k, v in sorted(s["labels"].items())) or "-"
        state = {True: "firing", False: "ok", None: "no verdict"}[s["firing"]]
        value = "-" if s["value"] is None else f"{s['value']:g}"
        write(f"  {{{labels}}}  value {value}  {state}  ({s['reason']}, {s['samples']} samples)\n")
    return EXIT_OK


async def _alerts(auto, args) -> int:
    rows = await _alerts_api(auto, args).alerts(state=args.state, limit=args.limit)
    if args.format == "json":
        write(json_document({"alerts": rows}))
        return EXIT_OK
    write(table(["alert", "rule", "group", "state", "severity", "count", "opened", "resolved"],
                [[r["alert_id"], r["rule"], r["group_key"], r["state"] + (" (escalated)" if r["escalated"] else ""),
                  r["severity"], r["count"], when(r["opened_at"]), when(r["resolved_at"])] for r in rows]))
    for r in rows:
        ctx = r["context"]
        write(f"\n{r['alert_id']}  {ctx.get('title', r['rule'])}\n")
        if ctx.get("error_message"):
            write(f"  error: {ctx.get('error_code')} {ctx['error_message']}\n")
        if ctx.get("next_action"):
            write(f"  next: {ctx['next_action']}\n")
        for h in r["history"]:
            write(f"  {when(h['at'])}  {h['kind']:<10}  count {h['count']:<6}  "
                  f"{', '.join(h['channels']) or '(no channel: logged)'}\n")
    return EXIT_OK
