"""`a44 auth ...`: API tokens for the REST API (§17) and the credentials the CLI uses against a remote daemon.

    a44 auth token create --name N --scope automation:write --expires 30d --allow-cidr 203.0.113.0/24
    a44 auth token list | revoke TOKEN_ID
    a44 auth login --project P [--url URL] [--token T]    # writes $A44_HOME/credentials (mode 0600)

Tokens are shown once, stored as sha256, bound to one project, scoped (automation:read | automation:write;
write implies read), expiring (--expires; `never` for no expiry) and optionally limited to CIDRs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .output import EXIT_OK, EXIT_USAGE, json_document, print_error, usage_error, write


def add_group(top) -> None:
    from .main import _Parser

    auth = top.add_parser("auth", help="API tokens and CLI credentials", description=__doc__,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = auth.add_subparsers(dest="auth_verb", metavar="VERB", parser_class=_Parser)
    verbs.required = True

    token = verbs.add_parser("token", help="create, list or revoke API tokens")
    tverbs = token.add_subparsers(dest="token_verb", metavar="VERB", parser_class=_Parser)
    tverbs.required = True
    create = tverbs.add_parser("create", help="create a token (shown once)")
    create.add_argument("--name", required=True)
    create.add_argument("--scope", action="append", required=True, metavar="SCOPE",
                        help="automation:read or automation:write (repeatable)")
    create.add_argument("--expires", default="30d", metavar="DURATION", help="e.g. 30d, 12h, or never (default 30d)")
    create.add_argument("--allow-cidr", action="append", default=[], metavar="CIDR",
                        help="only accept the token from this network (repeatable)")
    _common(create)
    create.set_defaults(_run=_token_create)
    lst = tverbs.add_parser("list", help="list the project's tokens (never the token itself)")
    _common(lst)
    lst.set_defaults(_run=_token_list)
    rev = tverbs.add_parser("revoke", help="revoke a token")
    rev.add_argument("token_id", metavar="TOKEN_ID")
    _common(rev)
    rev.set_defaults(_run=_token_revoke)

    login = verbs.add_parser("login", help="store a token in $A44_HOME/credentials (mode 0600)")
    login.add_argument("--url", default=None, help="the daemon's base URL (default http://127.0.0.1:8044)")
    login.add_argument("--token", default=None,
                       help="an existing token (default: create one with automation:write, 30 days)")
    _common(login)
    login.set_defaults(_run=_login)


def _common(p) -> None:
    p.add_argument("--project", metavar="P", help="project id (default: $A44_PROJECT, else pj_default)")
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")


def _with_store(body, args) -> int:
    import asyncio

    from ..app.automation import resolve_project
    from ..errors import A44Error

    async def main():
        from ..runtime.database import resolve_url
        from ..runtime.store import Store

        url = await asyncio.to_thread(resolve_url, start=True)
        store = await Store.connect(url, min_size=1, max_size=2)
        try:
            await store.migrate()
            return await body(store, resolve_project(args.project), args)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except A44Error as exc:
        print_error(exc)
        return EXIT_USAGE if exc.code == "E_INVALID_ARGUMENT" else 1


def _expires(text: str):
    from ..app.durations import parse_duration

    if text in ("never", "none", "0"):
        return None
    return parse_duration(text)


def _token_create(args) -> int:
    try:
        expires = _expires(args.expires)
    except ValueError as exc:
        return usage_error(str(exc))

    async def body(store, project, args):
        from ..runtime.ingestion.tokens import create_token

        tok = await create_token(store, project, args.name, args.scope, expires, args.allow_cidr)
        if args.format == "json":
            write(json_document(tok.to_dict()))
        else:
            exp = tok.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ") if tok.expires_at else "never"
            write(f"{tok.token}\n")
            print(f"token {tok.token_id} ({', '.join(tok.scopes)}) for {project}, expires {exp}"
                  + (f", from {', '.join(tok.allow_cidrs)}" if tok.allow_cidrs else "")
                  + "; shown once: store it now", file=sys.stderr)
        return EXIT_OK
    return _with_store(body, args)


def _token_list(args) -> int:
    async def body(store, project, args):
        from ..runtime.ingestion.tokens import list_tokens
        from .output import table, when

        rows = await list_tokens(store, project)
        if args.format == "json":
            write(json_document({"tokens": rows}))
        else:
            write(table(("id", "name", "scopes", "cidrs", "expires", "revoked"),
                        [(r["token_id"], r["name"], ",".join(r["scopes"]), ",".join(r["allow_cidrs"]) or "-",
                          when(r["expires_at"]), when(r["revoked_at"])) for r in rows]))
        return EXIT_OK
    return _with_store(body, args)


def _token_revoke(args) -> int:
    async def body(store, project, args):
        from ..runtime.ingestion.tokens import revoke_token

        await revoke_token(store, project, args.token_id)
        write(f"{args.token_id} revoked\n")
        return EXIT_OK
    return _with_store(body, args)


def credentials_path():
    from ..runtime.database import a44_home

    return a44_home() / "credentials"


def load_credentials() -> dict:
    path = credentials_path()
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"projects": {}}


def _login(args) -> int:
    from ..app.automation import resolve_project

    project = resolve_project(args.project)
    url = args.url or os.environ.get("A44_API_URL") or "http://127.0.0.1:8044"
    token = args.token
    if token is None:
        async def body(store, project, args):
            from datetime import timedelta
            import socket

            from ..runtime.ingestion.tokens import create_token

            tok = await create_token(store, project, f"login@{socket.gethostname()}", ["automation:write"],
                                     timedelta(days=30))
            return tok.token
        token = _with_store(body, args)
        if not isinstance(token, str):
            return token
    creds = load_credentials()
    creds.setdefault("projects", {})[project] = {"url": url, "token": token}
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(creds, fh, indent=2)
    os.chmod(path, 0o600)
    write(f"logged in to {project} at {url}; token stored in {path} (mode 0600)\n")
    return EXIT_OK
