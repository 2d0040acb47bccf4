"""What `a44 automation serve` and `a44 automation ingest` share: the HTTP plane's flags read into HttpSettings,
and the serving process (http/process.py) run with its log on stderr (cli/daemon_log.py) and its exit code."""

from __future__ import annotations

import argparse
import sys

from .output import settings_of


def add_host_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address the HTTP plane binds (default 127.0.0.1); a non-loopback one needs "
                        "--metrics-token-required (docs/api.md \"Listening address\")")


def add_http_limit_arguments(p: argparse.ArgumentParser) -> None:
    """The HTTP plane's limits (docs/api.md "Limits"), shared by `serve` and `ingest`."""
    p.add_argument("--http-header-timeout", default="10s", metavar="DURATION",
                   help="close a connection whose request line and headers have not all arrived this long after it "
                        "opened or after its previous answer; also the keep-alive idle time (default 10s)")
    p.add_argument("--http-body-timeout", default="30s", metavar="DURATION",
                   help="answer 408 E_REQUEST_TIMEOUT when a request body has not all arrived within this (default 30s)")
    p.add_argument("--http-max-connections", type=int, default=1000, metavar="N",
                   help="open connections past N get 503 E_SERVER_BUSY and are closed (default 1000)")
    p.add_argument("--metrics-token-required", action="store_true",
                   help="GET /metrics requires an automation:read API token (default: loopback clients only)")


def http_settings(args):
    """HttpSettings from the flags above; ValueError with the flag's name when one is out of range."""
    from ..app.serve import HttpLimits, HttpSettings
    from ..durations import parse_duration

    timeouts = {}
    for flag in ("header_timeout", "body_timeout"):
        try:
            timeouts[flag] = parse_duration(getattr(args, f"http_{flag}")).total_seconds()
        except ValueError as exc:
            raise ValueError(f"--http-{flag.replace('_', '-')}: {exc}") from None
        if timeouts[flag] <= 0:
            raise ValueError(f"--http-{flag.replace('_', '-')} must be longer than 0s")
    if args.http_max_connections < 1:
        raise ValueError("--http-max-connections must be at least 1")
    limits = HttpLimits(max_connections=args.http_max_connections,
                        metrics_token_required=args.metrics_token_required, **timeouts)
    return HttpSettings.from_settings(settings_of(args), port=args.http_port or 0, host=args.host,
                                      pool_size=getattr(args, "pool", None) or 20, limits=limits)


def serve_http(settings, args, announce: str | None = None) -> int:
    """The serving process of http/process.py until SIGTERM/SIGINT, its logs on stderr (cli/daemon_log.py);
    `announce` (with `{url}`) is printed once everything listens. `serve` and `ingest` both come through here."""
    from ..errors import A44Error
    from ..http.process import serve_until_signalled
    from .daemon_log import configure
    from .output import exit_code, print_error

    configure(getattr(args, "log_format", "text"), getattr(args, "verbose", 0))

    def ready(url):
        if announce:
            print(announce.format(url=url), file=sys.stderr, flush=True)

    try:
        serve_until_signalled(settings, ready)
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)
    return 0
