"""`a44 automation ingest`: only the HTTP ingestion plane (webhooks, the bus endpoint, the REST API) without
claiming runs, for deployments that separate ingestion from workers (`a44 automation serve` runs both).
Stops on SIGTERM/SIGINT."""

from __future__ import annotations

import argparse

from .daemon_log import add_log_arguments
from .output import settings_of, usage_error
from .serving import add_host_argument, add_http_limit_arguments, http_settings, serve_http


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("ingest", help="serve only the HTTP ingestion plane", description=__doc__)
    p.add_argument("--http-port", type=int, default=8044, help="port (default 8044)")
    add_host_argument(p)
    p.add_argument("--database-url", help="PostgreSQL URL (default A44_DATABASE_URL, else the embedded server)")
    p.add_argument("--pool", type=int, default=20, help="database connections (default 20)")
    add_http_limit_arguments(p)
    add_log_arguments(p)
    return p


def run(args) -> int:
    from ..app.serve import ServeSettings

    try:
        http = http_settings(args)
    except ValueError as exc:
        return usage_error(str(exc))
    env = settings_of(args)
    return serve_http(ServeSettings(http=http, database_url=args.database_url or env.database_url, env=env), args,
                      announce="ingesting on {url}")
