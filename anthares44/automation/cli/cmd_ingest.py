"""`a44 automation ingest`: only the HTTP ingestion plane (webhooks, the bus endpoint, the REST API) without
claiming runs, for deployments that separate ingestion from workers (`a44 automation serve` runs both).
Stops on SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("ingest", help="serve only the HTTP ingestion plane", description=__doc__)
    p.add_argument("--http-port", type=int, default=8044, help="port (default 8044)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--database-url", help="PostgreSQL URL (default A44_DATABASE_URL, else the embedded server)")
    p.add_argument("--pool", type=int, default=20, help="database connections (default 20)")
    return p


def run(args) -> int:
    import asyncio
    import logging
    import signal

    from ..errors import A44Error

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.getLogger("a44").addHandler(handler)

    async def main() -> None:
        from ..runtime.database import resolve_url
        from ..runtime.http import HttpServer
        from ..runtime.store import Store

        url = args.database_url or await asyncio.to_thread(resolve_url, start=True)
        store = await Store.connect(url, max_size=args.pool)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await store.migrate()
            server = await HttpServer(store, host=args.host, port=args.http_port).start()
            print(f"ingesting on {server.url}", file=sys.stderr, flush=True)
            await stop.wait()
            await server.stop()
        finally:
            await store.close()

    try:
        asyncio.run(main())
    except A44Error as exc:
        print(f"{exc.code} {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"E_HTTP_BIND cannot listen on {args.host}:{args.http_port}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
