"""A throwaway embedded PostgreSQL for a benchmark (helper of bench_grants.py, bench_metrics.py): a temp dir,
fsync off (the figures are read latencies, not commit durability), a database `a44`, removed afterwards."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anthares44.automation.runtime.postgres.embedded import EmbeddedServer, free_port  # noqa: E402


def run_on_scratch_database(prefix: str, body: Callable[[str], Awaitable[None]]) -> None:
    """Start the server, create the database, run `body(url)` to completion, stop and delete everything."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    server = EmbeddedServer(root, durable=False)
    server.initdb()
    port = free_port()
    server.start(port)
    admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    try:
        async def mk():
            c = await asyncpg.connect(admin)
            await c.execute("create database a44")
            await c.close()
        asyncio.run(mk())
        asyncio.run(body(f"postgresql://postgres@127.0.0.1:{port}/a44"))
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
