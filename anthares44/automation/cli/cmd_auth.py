"""`a44 auth ...`: API tokens for the REST API and the credentials the CLI uses against a remote daemon.

    a44 auth token create --name N --scope automation:write --expires 30d --allow-cidr 203.0.113.0/24
    a44 auth token list | revoke TOKEN_ID
    a44 auth login --project P [--url URL] [--token T | --token-stdin] [--default]   # $A44_HOME/credentials, 0600
    a44 auth logout [--project P | --all]
    a44 auth status [--project P] [--format json]   # which server/project, token name/scopes/expiry

Tokens are shown once, stored as sha256, bound to one project, scoped (automation:read | automation:write |
automation:approve, to decide approvals;
write implies read), expiring (--expires; `never` for no expiry) and optionally limited to CIDRs.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_OK, EXIT_USAGE
from .output import (
    ArgParser,
    add_target_options,
    exit_code,
    json_document,
    print_error,
    remote_admin,
    settings_of,
    usage_error,
    write,
)


def add_group(top) -> None:
    auth = top.add_parser("auth", help="API tokens and CLI credentials", description=__doc__,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = auth.add_subparsers(dest="auth_verb", metavar="VERB", parser_class=ArgParser)
    verbs.required = True

    token = verbs.add_parser("token", help="create, list or revoke API tokens")
    tverbs = token.add_subparsers(dest="token_verb", metavar="VERB", parser_class=ArgParser)
    tverbs.required = True
    create = tverbs.add_parser("create", help="create a token (shown once)")
    create.add_argument("--name", required=True)
    create.add_argument("--scope", action="append", required=True, metavar="SCOPE",
                        help="automation:read, automation:write, automation:admin or automation:approve "
                             "(decide approvals; repeatable)")
    create.add_argument("--expires", default="30d", metavar="DURATION", help="e.g. 30d, 12h, or never (default 30d)")
    create.add_argument("--allow-cidr", action="append", default=[], metavar="CIDR",
                        help="only accept the token from this network (repeatable)")
    _common(create)
    add_target_options(create)
    create.set_defaults(_run=_token_create)
    lst = tverbs.add_parser("list", help="list the project's tokens (never the token itself)")
    _common(lst)
    add_target_options(lst)
    lst.set_defaults(_run=_token_list)
    rev = tverbs.add_parser("revoke", help="revoke a token")
    rev.add_argument("token_id", metavar="TOKEN_ID")
    _common(rev)
    add_target_options(rev)
    rev.set_defaults(_run=_token_revoke)

    login = verbs.add_parser("login", help="store a token in $A44_HOME/credentials (mode 0600)")
    login.add_argument("--url", default=None,
                       help="the daemon's base URL (default $A44_API_URL, else http://127.0.0.1:8044)")
    login.add_argument("--token", default=None,
                       help="an existing token; `-` reads it from stdin (default: create one in the local "
                            "database with automation:write, 30 days)")
    login.add_argument("--token-stdin", action="store_true", help="read the token from standard input")
    login.add_argument("--default", action="store_true",
                       help="kept for older scripts: every login now selects its project for the verbs that follow")
    _common(login)
    login.set_defaults(_run=_login)
    logout = verbs.add_parser("logout", help="remove a stored login from $A44_HOME/credentials")
    logout.add_argument("--all", action="store_true", help="remove every stored login")
    _common(logout)
    logout.set_defaults(_run=_logout)
    status = verbs.add_parser("status", help="stored logins, what the server says of each token, and where "
                                             "runtime verbs go (never prints a token)")
    _common(status)
    status.set_defaults(_run=_status)


def _common(p) -> None:
    p.add_argument("--project", metavar="P", help="project id (default: $A44_PROJECT, else pj_default)")
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")


def _with_admin(body, args, remote=None) -> int:
    """`body(admin, args)` with the project's app.admin.Admin on the local database; with `remote` (a run_api body), the token verbs go to
    the daemon when the target is remote (an automation:admin token)."""
    import asyncio

    from ..app.automation import resolve_project
    from ..errors import A44Error
    from .output import goes_remote, run_api

    if remote is not None:
        try:
            if goes_remote(args):
                return run_api(remote, args)
        except A44Error as exc:
            print_error(exc)
            return exit_code(exc)

    async def main():
        from ..app.admin import Admin
        from ..app.database import open_store

        async with open_store(settings_of(args), migrate=True) as store:
            return await body(Admin(store, resolve_project(args.project, settings_of(args))), args)

    try:
        return asyncio.run(main())
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)


def _token_create(args) -> int:
    from ..app.admin import token_ttl
    from ..errors import A44Error

    try:
        token_ttl(args.expires)    # refused before anything starts, by the rule the REST API answers with
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)

    async def body(admin, args):
        tok = await admin.create_token(args.name, args.scope, args.expires, args.allow_cidr)
        return _new_token(args, tok.to_dict())

    async def remote(auto, args):
        return _new_token(args, await remote_admin(auto).create_token(args.name, args.scope, args.expires,
                                                                         args.allow_cidr))
    return _with_admin(body, args, remote)


def _new_token(args, tok: dict) -> int:
    if args.format == "json":
        write(json_document(tok))
    else:
        exp = tok["expires_at"].strftime("%Y-%m-%dT%H:%M:%SZ") if tok["expires_at"] else "never"
        write(f"{tok['token']}\n")
        print(f"token {tok['token_id']} ({', '.join(tok['scopes'])}) for {tok['project_id']}, expires {exp}"
              + (f", from {', '.join(tok['allow_cidrs'])}" if tok["allow_cidrs"] else "")
              + "; shown once: store it now", file=sys.stderr)
    return EXIT_OK


def _token_list(args) -> int:
    async def body(admin, args):
        return _tokens(args, await admin.tokens())

    async def remote(auto, args):
        return _tokens(args, await remote_admin(auto).tokens())
    return _with_admin(body, args, remote)


def _tokens(args, rows: list[dict]) -> int:
    from .output import table, when

    if args.format == "json":
        write(json_document({"tokens": rows}))
    else:
        write(table(("id", "name", "scopes", "cidrs", "expires", "revoked"),
                    [(r["token_id"], r["name"], ",".join(r["scopes"]), ",".join(r["allow_cidrs"]) or "-",
                      when(r["expires_at"]), when(r["revoked_at"])) for r in rows]))
    return EXIT_OK


def _token_revoke(args) -> int:
    async def body(admin, args):
        await admin.revoke_token(args.token_id)
        write(f"{args.token_id} revoked\n")
        return EXIT_OK

    async def remote(auto, args):
        await remote_admin(auto).revoke_token(args.token_id)
        write(f"{args.token_id} revoked\n")
        return EXIT_OK
    return _with_admin(body, args, remote)


def _home(args):
    """The a44 home of the settings `main` read: where the credentials file is."""
    from ..paths import a44_home

    return a44_home(settings_of(args).home)


def credentials_path(args):
    from ..app.credentials import credentials_path as path

    return path(_home(args))


def load_credentials(args) -> dict:
    from ..app.credentials import load_credentials as load

    return load(_home(args))


def _read_token(args) -> str | None:
    if args.token_stdin or args.token == "-":
        text = sys.stdin.readline().strip()
        if not text:
            raise ValueError("no token on standard input")
        return text
    return args.token


def _login(args) -> int:
    from ..app.automation import resolve_project
    from ..app.credentials import DEFAULT_API_URL, normalize_url, store_login
    from ..errors import A44Error

    project = resolve_project(args.project, settings_of(args))
    try:
        url = normalize_url(args.url or settings_of(args).api_url or DEFAULT_API_URL)
        token = _read_token(args)
    except A44Error as exc:
        print_error(exc)
        return EXIT_USAGE
    except ValueError as exc:
        return usage_error(str(exc), "echo \"$TOKEN\" | a44 auth login --project P --url URL --token-stdin")
    if token is None:
        async def body(admin, args):
            import socket

            tok = await admin.create_token(f"login@{socket.gethostname()}", ["automation:write"], "30d", [])
            return tok.token
        token = _with_admin(body, args)
        if not isinstance(token, str):
            return token
    path = store_login(_home(args), project, url, token)
    write(f"logged in to {project} at {url}; token stored in {path} (mode 0600)\n")
    print(f"a44: the verbs that follow act on {project} at {url} (until `a44 auth logout`; --local for the "
          "database)", file=sys.stderr)
    return EXIT_OK


def _logout(args) -> int:
    from ..app.credentials import default_login, remove_login

    home = _home(args)
    if args.all:
        gone = remove_login(home, None)
    else:
        project = args.project or settings_of(args).project
        if project is None:
            found = default_login(home)
            logins = list(load_credentials(args).get("projects", {}))
            project = found[0] if found else (logins[0] if len(logins) == 1 else None)
            if project is None:
                return usage_error("which login? pass --project P (or --all)",
                                   "a44 auth status lists the stored logins")
        gone = remove_login(home, project)
    if not gone:
        write("no stored login to remove\n")
        return EXIT_OK
    write("".join(f"logged out of {p} (token removed from {credentials_path(args)})\n" for p in gone))
    from ..app.credentials import select_target
    from ..errors import A44Error

    try:
        print(f"a44: the verbs that follow use {select_target(settings_of(args)).describe()}", file=sys.stderr)
    except A44Error:
        pass
    return EXIT_OK


def _status(args) -> int:
    """The stored logins and what the server says about each token (never the token itself)."""
    import asyncio

    from ..app.credentials import select_target
    from ..app.remote import RemoteAutomation
    from ..errors import A44Error
    from .output import table, when

    projects = {p: e for p, e in load_credentials(args).get("projects", {}).items() if isinstance(e, dict)}
    if args.project:
        projects = {p: e for p, e in projects.items() if p == args.project}

    async def check(project, entry):
        doc = {"project": project, "url": entry.get("url"), "default": bool(entry.get("default")),
               "saved_at": entry.get("saved_at"), "ok": False, "token": None, "error": None}
        auto = RemoteAutomation(entry.get("url") or "", entry.get("token") or "", project)
        try:
            doc["token"] = await auto.whoami()
            doc["ok"] = True
        except A44Error as exc:
            doc["error"] = exc.to_dict()
        finally:
            await auto.close()
        return doc

    async def main():
        return [await check(p, e) for p, e in projects.items()]

    logins = asyncio.run(main()) if projects else []
    try:
        target = select_target(settings_of(args), args.project).describe()
    except A44Error as exc:
        target = f"{exc.code} {exc.message}"
    if args.format == "json":
        write(json_document({"credentials": str(credentials_path(args)), "logins": logins, "target": target}))
    else:
        if not logins:
            write(f"not logged in (no login in {credentials_path(args)}"
                  + (f" for {args.project}" if args.project else "") + ")\n")
        rows = []
        for d in logins:
            tok = d["token"] or {}
            rows.append((d["project"] + (" (selected)" if d["default"] else ""), d["url"],
                         tok.get("name") if d["ok"] else d["error"]["code"], tok.get("token_id"),
                         ",".join(tok.get("scopes") or []) or None,
                         (when(tok.get("expires_at")) if tok.get("expires_at") else "never") if d["ok"] else None))
        if rows:
            write(table(("project", "server", "token", "id", "scopes", "expires"), rows))
            for d in logins:
                if not d["ok"]:
                    write(f"{d['project']}: {d['error']['code']} {d['error']['message']}\n")
        write(f"runtime verbs use: {target}\n")
    return EXIT_OK if logins and all(d["ok"] for d in logins) else 1
