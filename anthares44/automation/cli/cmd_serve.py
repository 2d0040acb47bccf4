"""`a44 automation serve`: the interpreter daemon. Migrates the schema, then claims due runs under leases and
drives them until SIGTERM/SIGINT; then stops claiming, lets in-flight steps finish for up to `--grace`, releases
its leases and exits 0. Several daemons may serve one database. Logs go to stderr (cli/daemon_log.py): the
lifecycle (started, migrated, listening, stopped, database lost / back) and warnings by default, a line per run
state change with -v, per step attempt with -vv; `--log-format json` prints one JSON object per line.
"""

from __future__ import annotations

import argparse

from .daemon_log import add_log_arguments
from .output import settings_of, usage_error
from .serving import add_host_argument, add_http_limit_arguments, http_settings, serve_http


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("serve", help="run the interpreter daemon (claims and drives runs)",
                              description=__doc__)
    p.add_argument("--lease-timeout", metavar="DURATION",
                   help="lease per run, renewed every third of it while a step runs (default 30s, or "
                        "A44_LEASE_TIMEOUT); size it from the p99 of the slowest step plus 50%%")
    p.add_argument("--concurrency", type=int, metavar="N", help="runs in flight in this daemon (default 16)")
    p.add_argument("--worker-id", help="name of this worker in leases and attempts (default host:pid:random)")
    p.add_argument("--database-url", help="PostgreSQL URL (default A44_DATABASE_URL, else the embedded server)")
    p.add_argument("--app-database-url",
                   help="PostgreSQL URL with {project} where each project's workflow SQL runs (default "
                        "A44_APP_DATABASE_URL, else the embedded server's database of each project; never the "
                        "control store)")
    p.add_argument("--grace", default="10s", metavar="DURATION",
                   help="at SIGTERM, how long in-flight steps may finish before leases are released (default 10s)")
    p.add_argument("--http-port", type=int, default=None, metavar="PORT",
                   help="also serve webhooks, the bus endpoint and the REST API on --host:PORT (default off; "
                        "8044 by convention; `a44 automation ingest` serves only that)")
    add_host_argument(p)
    add_http_limit_arguments(p)
    add_log_arguments(p)
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="-v: a line per run state change; -vv: per step attempt too")
    return p


def run(args) -> int:
    from dataclasses import replace

    from ..app.alerts import alert_interval
    from ..app.serve import ServeSettings
    from ..durations import parse_duration

    try:
        daemon = ServeSettings.daemon(settings_of(args),
            lease_timeout=parse_duration(args.lease_timeout) if args.lease_timeout else None,
            concurrency=args.concurrency, worker_id=args.worker_id, database_url=args.database_url,
            app_database_url=args.app_database_url,
            grace=parse_duration(args.grace))
        http = http_settings(args)    # checked even without --http-port: a wrong flag is never silently unused
        alerts = alert_interval(settings_of(args).alert_interval)
    except ValueError as exc:
        return usage_error(str(exc))
    return serve_http(replace(daemon, http=http if args.http_port is not None else None, alert_interval_s=alerts),
                      args)
