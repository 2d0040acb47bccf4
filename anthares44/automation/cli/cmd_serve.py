"""`a44 automation serve`: the interpreter daemon. Migrates the schema, then claims due runs under leases and
drives them until SIGTERM/SIGINT; then stops claiming, lets in-flight steps finish for up to `--grace`, releases
its leases and exits 0. Several daemons may serve one database. Logs go to stderr, one structured line per run
state change with -v (quiet by default: start, stop and warnings only).
"""

from __future__ import annotations

import argparse
import sys

from .cmd_ingest import add_http_limit_arguments, http_limits


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
                   help="PostgreSQL URL where workflow SQL runs (default A44_APP_DATABASE_URL, else the embedded "
                        "server's a44_app database; never the control store)")
    p.add_argument("--grace", default="10s", metavar="DURATION",
                   help="at SIGTERM, how long in-flight steps may finish before leases are released (default 10s)")
    p.add_argument("--http-port", type=int, default=None, metavar="PORT",
                   help="also serve webhooks, the bus endpoint and the REST API on 127.0.0.1:PORT (default off; "
                        "8044 by convention; `a44 automation ingest` serves only that)")
    add_http_limit_arguments(p)
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="-v: a line per run state change; -vv: per step attempt too")
    return p


def run(args) -> int:
    import asyncio
    import logging
    import signal

    from ..durations import parse_duration
    from ..errors import A44Error
    from ..runtime.engine import Daemon, WorkerSettings

    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("a44")
    root.addHandler(handler)
    root.setLevel(level)
    try:
        settings = WorkerSettings.from_env(
            lease_timeout=parse_duration(args.lease_timeout) if args.lease_timeout else None,
            concurrency=args.concurrency, worker_id=args.worker_id, database_url=args.database_url,
            app_database_url=args.app_database_url,
            grace=parse_duration(args.grace))
        limits = http_limits(args)
    except ValueError as exc:
        print(f"a44: error: {exc}", file=sys.stderr)
        return 2

    async def main() -> None:
        daemon = Daemon(settings)
        daemon.http_port = getattr(args, "http_port", None)
        daemon.http_limits = limits
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, daemon.request_stop)
        await daemon.serve()

    try:
        asyncio.run(main())
    except A44Error as exc:
        print(f"{exc.code} {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return 1
    return 0
