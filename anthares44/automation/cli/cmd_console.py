"""`a44 automation console`: print the web console's URL (the `serve --http-port` of this machine) and open it in
the default browser. It first asks `GET /healthz` whether a daemon answers there, so a console that is not
running says so (exit 1, E_CONSOLE_UNREACHABLE) instead of opening an error page. docs/console.md."""

from __future__ import annotations

import argparse
import urllib.error
import urllib.request

from ..errors import EXIT_OK
from .output import json_document, write

DEFAULT_PORT = 8044


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("console", help="open the web console of the serve on this machine",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="PORT",
                   help=f"the --http-port of `a44 automation serve` (default {DEFAULT_PORT})")
    p.add_argument("--host", default="127.0.0.1", help="where serve listens (default 127.0.0.1)")
    p.add_argument("--no-open", action="store_true", help="print the URL only")
    p.add_argument("--format", "-f", choices=("table", "text", "json"), default="text",
                   help="output format (default: text, the URL)")
    return p


def run(args: argparse.Namespace) -> int:
    from ..errors import E_CONSOLE_UNREACHABLE, A44Error
    from .output import exit_code, print_error

    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{args.port}/"
    try:
        with urllib.request.urlopen(url + "healthz", timeout=3) as resp:
            reachable = resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        reachable = False
    if args.format == "json":
        write(json_document({"url": url, "reachable": reachable}))
    if not reachable:
        exc = A44Error(E_CONSOLE_UNREACHABLE, f"no a44 daemon answers at {url}",
                       hint=f"start one: a44 automation serve --http-port {args.port}")
        print_error(exc)
        return exit_code(exc)
    if args.format != "json":
        write(url + "\n")
    if not args.no_open:
        import webbrowser

        webbrowser.open(url)
    return EXIT_OK
