"""`a44 automation webhook secret|rotate|sign|send|list`: the signed webhooks (docs/webhooks.md).

    a44 automation webhook secret trg_erp_sync          # shows the secret once
    a44 automation webhook rotate trg_erp_sync          # new secret; the old one stays valid 48 h more
    a44 automation webhook sign --trigger trg_erp_sync --file payload.json
    a44 automation webhook send --trigger trg_erp_sync --file payload.json --idempotency-key K --repeat 2

`sign` and `send` use the current secret from the database without printing it. `send` posts to
`--url` (default $A44_API_URL, else http://127.0.0.1:8044: `a44 automation serve --http-port 8044`).
"""

from __future__ import annotations

import argparse
import sys
import time

from ..errors import EXIT_ERROR, EXIT_OK
from .output import (
    add_common_options,
    add_target_options,
    json_document,
    remote_admin,
    run_api,
    settings_of,
    usage_error,
    write,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("webhook", help="webhook secrets, signing and test sends", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="webhook_verb", metavar="VERB")
    verbs.required = True
    s = verbs.add_parser("secret", help="show a webhook trigger's secret (once)")
    s.add_argument("trigger", metavar="TRIGGER")
    add_common_options(s)
    add_target_options(s)
    r = verbs.add_parser("rotate", help="add a new secret; the old one stays valid 48 h more")
    r.add_argument("trigger", metavar="TRIGGER")
    add_common_options(r)
    add_target_options(r)
    for name, help_ in (("sign", "print valid signature headers for a body"),
                        ("send", "sign and POST a body, printing the dedupe decision")):
        q = verbs.add_parser(name, help=help_)
        q.add_argument("--trigger", required=True)
        q.add_argument("--file", required=True, help="the JSON body (sent byte for byte)")
        q.add_argument("--idempotency-key", default=None)
        q.add_argument("--timestamp", type=int, default=None, help="Unix seconds (default now)")
        if name == "send":
            q.add_argument("--repeat", type=int, default=1)
            q.add_argument("--url", default=None, help="server base URL (default $A44_API_URL or "
                                                       "http://127.0.0.1:8044)")
        add_common_options(q)
        add_target_options(q)
    lst = verbs.add_parser("list", help="webhook triggers and their URLs")
    add_common_options(lst)
    add_target_options(lst)
    return p


def run(args) -> int:
    if args.webhook_verb in ("sign", "send"):
        try:
            with open(args.file, "rb") as fh:
                args.body = fh.read()
        except OSError as exc:
            return usage_error(f"cannot read {args.file}: {exc.strerror}")
    if args.webhook_verb == "send" and args.repeat < 1:
        return usage_error("--repeat must be at least 1")
    return run_api({"secret": _secret, "rotate": _rotate, "sign": _sign, "send": _send,
                    "list": _list}[args.webhook_verb], args, migrate=True,
                   local_only=None if args.webhook_verb in ("secret", "rotate") else f"webhook {args.webhook_verb}")


def _admin(auto):
    """The project's administration: app.admin.Admin on the database, its REST twin for a remote `auto`."""
    from ..app.admin import Admin

    return remote_admin(auto) if getattr(auto, "remote", False) else Admin(auto.store, auto.project)


async def _secret(auto, args) -> int:
    secret = await _admin(auto).webhook_secret(args.trigger)
    if args.format == "json":
        write(json_document({"trigger_id": args.trigger, "secret": secret}))
    else:
        write(secret + "\n")
        print(f"shown once; POST /v1/{auto.project}/{args.trigger} signs with it", file=sys.stderr)
    return EXIT_OK


async def _rotate(auto, args) -> int:
    out = await _admin(auto).rotate_webhook_secret(args.trigger)
    if args.format == "json":
        write(json_document(out))
    else:
        write(out["secret"] + "\n")
        print(f"new secret of {args.trigger} (shown once); the previous one stays valid until "
              f"{out['previous_valid_until']:%Y-%m-%dT%H:%M:%SZ}, then it is refused", file=sys.stderr)
    return EXIT_OK


async def _sign(auto, args) -> int:
    from ..app.webhooks import signed_headers, signing_secret

    secret = await signing_secret(auto.store, auto.project, args.trigger)
    ts = args.timestamp or int(time.time())
    h = signed_headers(secret, args.body, ts, args.idempotency_key)
    if args.format == "json":
        write(json_document(h))
        return EXIT_OK
    write(f"A44-Timestamp: {h['A44-Timestamp']}\nA44-Signature: {h['A44-Signature']}\n")
    if args.idempotency_key is None:
        write("A44-Idempotency-Key: (absent — the ingestion derives one from the body's hash)\n")
    else:
        write(f"A44-Idempotency-Key: {args.idempotency_key}\n")
    return EXIT_OK


async def _send(auto, args) -> int:
    import json

    import aiohttp

    from ..app.webhooks import signed_headers, signing_secret, webhook_path

    secret = await signing_secret(auto.store, auto.project, args.trigger)
    base = (args.url or settings_of(args).api_url or "http://127.0.0.1:8044").rstrip("/")
    url = base + webhook_path(auto.project, args.trigger)
    worst = EXIT_OK
    docs = []
    async with aiohttp.ClientSession() as session:
        for i in range(1, args.repeat + 1):
            ts = args.timestamp or int(time.time())
            try:
                async with session.post(url, data=args.body,
                                        headers=signed_headers(secret, args.body, ts, args.idempotency_key)) as resp:
                    text = await resp.text()
                    age = float(resp.headers.get("A44-Idempotency-Key-Age", "0") or 0)
                    status = resp.status
            except aiohttp.ClientError as exc:
                print(f"E_NETWORK cannot reach {url}: {exc}", file=sys.stderr)
                print("hint: start `a44 automation serve --http-port 8044` (or pass --url)", file=sys.stderr)
                return EXIT_ERROR
            try:
                doc = json.loads(text)
            except ValueError:
                doc = {"raw": text}
            docs.append({"n": i, "status": status, **doc, "key_age_seconds": age})
            if args.format == "json":
                continue
            if status in (200, 202):
                what = "created" if status == 202 else f"deduplicated (key age {age:.1f}s)"
                write(f"{i}/{args.repeat}  {status} {doc.get('run_id')}   {what}\n")
            else:
                err = doc.get("error", {})
                write(f"{i}/{args.repeat}  {status} {err.get('code', '-')} {err.get('message', text[:200])}\n")
                worst = EXIT_ERROR
    if args.format == "json":
        write(json_document({"url": url, "responses": docs}))
    return worst


async def _list(auto, args) -> int:
    from ..app.webhooks import webhook_triggers
    from .output import table

    rows = await webhook_triggers(auto.store, auto.project)
    if args.format == "json":
        write(json_document({"triggers": rows}))
    else:
        write(table(("trigger", "workflow", "path"), [(r["trigger_id"], r["workflow_id"], r["path"]) for r in rows]))
    return EXIT_OK
