"""Round trips and transactions per run, counted in-process (helper of bench_runtime.py).

An in-process `Engine` (what the daemon runs) drives N already-created 3-step `pass` runs (with `effect=True`,
`pass` is replaced by a subclass the engine does not inline, to measure the path of steps with an effect); asyncpg's
`Connection._execute` (every parameterised statement) and `Connection.execute` without arguments (simple
queries: BEGIN, COMMIT, the pool's reset) are wrapped to count client/server round trips, and statements sent
outside a transaction count as one transaction each (a BEGIN opens one). Statement preparation (one extra round
trip per statement text per pooled connection, then cached by asyncpg) is counted apart as `prepares`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import asyncpg.connection

from anthares44.automation.runtime.engine import Engine
from anthares44.automation.runtime.store.core import Store
from anthares44.automation.stdlib_connectors.pass_ import PassConnector
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry

PROJECT = "pj_default"


@contextmanager
def counting():
    counts: Counter[str] = Counter()
    C = asyncpg.connection.Connection
    orig_execute, orig__execute, orig_get_statement = C.execute, C._execute, C._get_statement
    orig__executemany = C._executemany

    def note(conn, what):
        counts["round_trips"] += 1
        if not conn.is_in_transaction():
            counts["transactions"] += 1
        counts[what] += 1

    async def execute(self, query, *args, timeout=None):
        if not args:
            note(self, query.split()[0].lower() if query.strip() else "empty")
        return await orig_execute(self, query, *args, timeout=timeout)

    async def _execute(self, query, args, limit, timeout, **kw):
        note(self, "statement")
        return await orig__execute(self, query, args, limit, timeout, **kw)

    async def _executemany(self, query, args, timeout, **kw):
        note(self, "executemany")       # pipelined: one round trip for all the argument sets
        return await orig__executemany(self, query, args, timeout, **kw)

    async def _get_statement(self, query, timeout, **kw):
        before = len(self._stmt_cache)
        st = await orig_get_statement(self, query, timeout, **kw)
        if len(self._stmt_cache) != before:
            counts["prepares"] += 1
        return st

    C.execute, C._execute, C._get_statement, C._executemany = execute, _execute, _get_statement, _executemany
    try:
        yield counts
    finally:
        C.execute, C._execute, C._get_statement = orig_execute, orig__execute, orig_get_statement
        C._executemany = orig__executemany


class EffectPass(PassConnector):
    """`pass` as if it had an external effect (a subclass is not inlined): every step then takes the general
    path, a `running` row committed before the call and the finish committed with the next start."""


async def count_round_trips(url: str, home: Path, n: int = 200, concurrency: int = 64, effect: bool = False) -> dict:
    store = await Store.connect(url, min_size=2, max_size=16, results_dir=home / "results")
    try:
        tag = f"rt-{effect}-{time.monotonic_ns()}"
        await asyncio.gather(*(store.create_run(PROJECT, "wf_bench_pass", {"i": i}, f"{tag}-{i}")
                               for i in range(n)))
        registry = ConnectorRegistry()
        if effect:
            registry.register(EffectPass(), "pass")
        engine = Engine(store, registry, worker_id="rt", concurrency=concurrency)
        t0 = time.perf_counter()
        with counting() as counts:
            await engine.drive()
        elapsed = time.perf_counter() - t0
        states = await store.fetch("runs_list", project=PROJECT, state=None, workflow="wf_bench_pass", step=None,
                                   since=None, limit=n, offset=0)
        assert sum(1 for r in states if r["state"] == "succeeded") == n, "not every run succeeded"
    finally:
        await store.close()
    return {"round_trips_per_run": counts["round_trips"] / n, "transactions_per_run": counts["transactions"] / n,
            "runs_s": n / elapsed,
            "detail_per_run": {k: round(v / n, 2) for k, v in sorted(counts.items())}}
