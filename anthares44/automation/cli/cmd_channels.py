"""`a44 monitor channel create|list|show|rm|test` and `a44 monitor notifications [--state S] | show ID | retry ID`:
notification channels and the outbox of notifications to them (docs/notifications.md).

    a44 monitor channel create --name squad-billing --type webhook --url https://hooks.example.com/a44 --secret-ref sec_hook
    a44 monitor channel create --name oncall-slack --type slack --url https://hooks.slack.com/services/T0/B0/XYZ
    a44 monitor channel create --name oncall-mail --type email --from a44@example.com --to oncall@example.com \\
        --smtp-host mail.example.com --smtp-port 587 --smtp-username-ref sec_smtp_user --smtp-password-ref sec_smtp_pass
    a44 monitor channel test squad-billing          # queue a test message, send it, print what happened
    a44 monitor notifications --state failed        # what was given up on ...
    a44 monitor notifications retry 42              # ... and sending one again

Exit 0 ok (`test`: delivered), 1 error or not delivered, 2 usage (bad type, URL, address, state).
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_ERROR, EXIT_OK
from .output import (
    ArgParser,
    add_common_options,
    add_target_options,
    json_document,
    run_api,
    service,
    settings_of,
    table,
    when,
    write,
)

NOTIFICATION_COLUMNS = ("id", "channel", "kind", "severity", "state", "attempts", "created", "last_error")


def add_verbs(verbs) -> None:
    """The channel and notifications verbs under `a44 monitor`."""
    channel = verbs.add_parser("channel", help="notification channels: webhook, slack, email",
                               description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cverbs = channel.add_subparsers(dest="channel_verb", metavar="VERB", parser_class=ArgParser)
    cverbs.required = True
    create = cverbs.add_parser("create", help="declare a channel")
    create.add_argument("--name", required=True)
    create.add_argument("--type", required=True, dest="kind", metavar="TYPE", help="webhook, slack or email")
    create.add_argument("--url", help="webhook / slack: where to POST")
    create.add_argument("--secret-ref", help="webhook: the secret that signs (sec_...)")
    create.add_argument("--from", dest="sender", metavar="ADDRESS", help="email: the sender")
    create.add_argument("--to", action="append", metavar="ADDRESS", help="email: a recipient (repeatable)")
    create.add_argument("--smtp-host", help="email: the SMTP server")
    create.add_argument("--smtp-port", type=int, default=587, help="email: its port (default 587)")
    create.add_argument("--no-starttls", action="store_true", help="email: plain SMTP (default: STARTTLS)")
    create.add_argument("--smtp-username-ref", metavar="SECRET", help="email: the login's user name (sec_...)")
    create.add_argument("--smtp-password-ref", metavar="SECRET", help="email: the login's password (sec_...)")
    add_common_options(create)
    add_target_options(create)
    create.set_defaults(_run=_run_channel)
    for verb, help_ in (("list", "the project's channels"), ("show", "one channel"), ("rm", "remove a channel"),
                        ("test", "send a test message now and print what happened")):
        p = cverbs.add_parser(verb, help=help_)
        if verb != "list":
            p.add_argument("name", metavar="NAME")
        if verb == "test":
            p.add_argument("--timeout", default="30s", metavar="DURATION",
                           help="how long to wait when a daemon sends it (default 30s)")
        add_common_options(p)
        add_target_options(p)
        p.set_defaults(_run=_run_channel)

    notes = verbs.add_parser("notifications", help="notifications: what was sent, what waits, what failed",
                             description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    notes.add_argument("--state", metavar="STATE", help="pending, delivered or failed")
    notes.add_argument("--limit", type=int, default=100, help="at most N, newest first (default 100)")
    add_common_options(notes)
    add_target_options(notes)
    notes.set_defaults(_run=_run_notifications, notifications_verb=None)
    nverbs = notes.add_subparsers(dest="notifications_verb", metavar="VERB", parser_class=ArgParser)
    for verb, help_ in (("show", "one notification, with its payload"),
                        ("retry", "send a failed notification again, with a fresh attempt budget")):
        p = nverbs.add_parser(verb, help=help_)
        p.add_argument("notification_id", metavar="ID", type=int)
        add_common_options(p)
        add_target_options(p)
        p.set_defaults(_run=_run_notifications)


def _config(args) -> dict:
    if args.kind == "webhook":
        return {k: v for k, v in (("url", args.url), ("secretRef", args.secret_ref)) if v is not None}
    if args.kind == "slack":
        return {"url": args.url} if args.url is not None else {}
    if args.kind == "email":
        smtp = {"host": args.smtp_host, "port": args.smtp_port, "starttls": not args.no_starttls}
        if args.smtp_username_ref:
            smtp["usernameSecretRef"] = args.smtp_username_ref
        if args.smtp_password_ref:
            smtp["passwordSecretRef"] = args.smtp_password_ref
        return {"from": args.sender, "to": args.to or [], "smtp": smtp}
    return {}


def _run_channel(args) -> int:
    return run_api(_channel, args)


def _run_notifications(args) -> int:
    return run_api(_notifications, args)


def _service(auto, args):
    from ..app.notifications import Notifications

    return service(auto, "notifications", lambda: Notifications(auto, settings_of(args)))


async def _channel(auto, args) -> int:
    from ..durations import parse_duration

    n, verb = _service(auto, args), args.channel_verb
    if verb == "create":
        doc = await n.create_channel(args.name, args.kind, _config(args))
        write(json_document(doc) if args.format == "json" else f"channel {doc['name']} ({doc['kind']}) created\n")
        return EXIT_OK
    if verb == "list":
        rows = await n.channels()
        if args.format == "json":
            write(json_document({"channels": rows}))
        else:
            write(table(("name", "type", "target", "updated"),
                        [(r["name"], r["kind"], _target(r["kind"], r["config"]), when(r["updated_at"])) for r in rows]))
        return EXIT_OK
    if verb == "show":
        doc = await n.channel(args.name)
        write(json_document(doc) if args.format == "json" else
              f"{doc['name']}  {doc['kind']}  created {when(doc['created_at'])}\n" + json_document(doc["config"]))
        return EXIT_OK
    if verb == "rm":
        await n.remove_channel(args.name)
        write(json_document({"removed": args.name}) if args.format == "json" else f"channel {args.name} removed\n")
        return EXIT_OK
    try:
        timeout = parse_duration(args.timeout).total_seconds()
    except ValueError as exc:
        from .output import usage_error

        return usage_error(f"--timeout: {exc}")
    row = await n.test_channel(args.name, timeout=timeout)
    if args.format == "json":
        write(json_document(row))
    elif row["state"] == "delivered":
        write(f"test notification {row['id']} delivered to {args.name} (key {row['idempotency_key']})\n")
    else:
        write(f"test notification {row['id']} to {args.name} NOT delivered ({row['state']}, attempt "
              f"{row['attempts']}): {row['last_error'] or 'not sent yet'}\n")
        if row["state"] == "pending":
            write("a running daemon keeps retrying it: a44 monitor notifications --state pending\n")
        else:
            write(f"fix the channel, then: {row['retry_command']}\n")
    return EXIT_OK if row["state"] == "delivered" else EXIT_ERROR


def _target(kind: str, config: dict) -> str:
    if kind == "email":
        return ", ".join(config["to"]) + f" via {config['smtp']['host']}:{config['smtp']['port']}"
    return config["url"]


async def _notifications(auto, args) -> int:
    n, verb = _service(auto, args), args.notifications_verb
    if verb == "show":
        write(json_document(await n.notification(args.notification_id)))
        return EXIT_OK
    if verb == "retry":
        requeued = await n.retry(args.notification_id)
        doc = {"id": args.notification_id, "requeued": requeued}
        write(json_document(doc) if args.format == "json" else
              f"notification {args.notification_id} " + ("pending again: the next daemon sends it\n" if requeued
                                                         else "is pending already\n"))
        return EXIT_OK
    rows = await n.notifications(state=getattr(args, "state", None), limit=getattr(args, "limit", 100))
    if args.format == "json":
        write(json_document({"notifications": rows}))
        return EXIT_OK
    write(table(NOTIFICATION_COLUMNS, [(r["id"], r["channel"], r["kind"], r["severity"], r["state"], r["attempts"],
                                        when(r["created_at"]), (r["last_error"] or "")[:80]) for r in rows]))
    return EXIT_OK



