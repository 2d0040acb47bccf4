"""`a44 automation serve` without the CLI's argument parsing (helper of bench_runtime.py): the same
`WorkerSettings.from_settings` + `Daemon.serve()` with SIGTERM/SIGINT handlers, used when the `a44` entry point cannot
start (the CLI is edited concurrently by other work) or with `--daemon module`.

    python bench/runtime_daemon.py DATABASE_URL CONCURRENCY
"""

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

# A44_BENCH_TREE (bench_runtime_ab): the package of another checkout, e.g. a worktree of the commit before
sys.path.insert(0, os.environ.get("A44_BENCH_TREE") or str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from anthares44.automation.runtime.engine import Daemon, WorkerSettings  # noqa: E402
from anthares44.automation.settings import Settings  # noqa: E402


def _bench_sql(value: str) -> str:
    """A44_BENCH_SQL's SQL: a file's text, or `schema:NAME,...`: those functions as schema.sql defines them now
    (a file variant's definitions stay in the database for the variants after it; this puts them back)."""
    if not value.startswith("schema:"):
        return Path(value).read_text()
    from anthares44.automation import runtime

    schema = (Path(runtime.__file__).parent / "schema.sql").read_text()
    out = []
    for name in value.removeprefix("schema:").split(","):
        start = schema.index(f"CREATE FUNCTION automation.{name}(")
        body = schema.index("AS $", start)
        quote = schema[body + 3:schema.index("$", body + 4) + 1]     # $$ or $_$
        end = schema.index(quote + ";", schema.index(quote, body) + len(quote)) + len(quote) + 1
        out.append("CREATE OR REPLACE" + schema[start + len("CREATE"):end])
    return "\n\n".join(out)


async def main(url: str, concurrency: int) -> None:
    if os.environ.get("A44_BENCH_IN_FLIGHT"):   # bench_runtime --in-flight: group statements in flight (A/B)
        from anthares44.automation.runtime.engine import committer

        flight, _, second = os.environ["A44_BENCH_IN_FLIGHT"].partition(":")
        committer.Committer.__init__.__kwdefaults__["max_in_flight"] = int(flight)
        if second:
            committer.Committer.__init__.__kwdefaults__["second_group"] = int(second)
    if os.environ.get("A44_BENCH_TIMER_YIELD"):  # bench_timers --no-yield: claims never yield to firing (A/B)
        from anthares44.automation.runtime.engine import timer_firing

        timer_firing.YIELD = float(os.environ["A44_BENCH_TIMER_YIELD"])
    if os.environ.get("A44_BENCH_TIMER_LANES"):  # bench_timers --lanes N: batches in flight while behind (A/B)
        from anthares44.automation.runtime.engine import timer_firing

        timer_firing.LANES = int(os.environ["A44_BENCH_TIMER_LANES"])
    if os.environ.get("A44_BENCH_SQL"):         # bench_runtime_ab: run this SQL first (e.g. an older function)
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            await conn.execute(_bench_sql(os.environ["A44_BENCH_SQL"]))
        finally:
            await conn.close()
    daemon = Daemon(WorkerSettings.from_settings(Settings.from_env(), database_url=url, concurrency=concurrency))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, daemon.request_stop)
    if os.environ.get("A44_BENCH_GROUPS"):     # print group statements' sizes and durations at exit
        import atexit
        import time as _t

        from anthares44.automation.runtime.engine import committer

        seen: list = []
        flush = committer.Committer._flush

        async def timed(self, group):
            t = _t.perf_counter()
            try:
                return await flush(self, group)
            finally:
                seen.append((len(group), _t.perf_counter() - t, sum(len(p.json()) for p in group)))

        committer.Committer._flush = timed

        def report():
            import statistics as st
            if seen:
                print(f"GROUPS n={len(seen)} size p50 {st.median(x for x, _, _ in seen)} mean "
                      f"{st.mean(x for x, _, _ in seen):.1f} ms p50 {1000 * st.median(d for _, d, _ in seen):.2f} "
                      f"p90 {1000 * sorted(d for _, d, _ in seen)[int(.9 * len(seen))]:.2f} "
                      f"ms/transition {1000 * sum(d for _, d, _ in seen) / sum(x for x, _, _ in seen):.3f} "
                      f"bytes/transition {sum(b for _, _, b in seen) / sum(x for x, _, _ in seen):.0f}",
                      file=sys.stderr, flush=True)
        atexit.register(report)
    if os.environ.get("A44_BENCH_COUNT"):      # print round trips / transactions at exit (runtime_roundtrips)
        from runtime_roundtrips import counting

        await daemon.start()                    # counted from readiness on: not the migration and warm-up
        with counting() as counts:
            await daemon.serve()
        print("COUNTS", dict(counts), file=sys.stderr, flush=True)
        return
    await daemon.serve()


if __name__ == "__main__":
    handler = logging.StreamHandler(sys.stderr)
    logging.getLogger("a44").addHandler(handler)
    logging.getLogger("a44").setLevel(logging.WARNING)
    logging.getLogger("a44.lifecycle").setLevel(logging.INFO)      # "serving ...": what the bench waits for
    if os.environ.get("A44_BENCH_UVLOOP"):     # bench_runtime A/B: the same daemon on uvloop's event loop
        import uvloop

        uvloop.run(main(sys.argv[1], int(sys.argv[2])))
    elif os.environ.get("A44_BENCH_CPROFILE"):  # bench_runtime_ab: cProfile the daemon into this file at exit
        import cProfile

        with cProfile.Profile() as prof:
            asyncio.run(main(sys.argv[1], int(sys.argv[2])))
        prof.dump_stats(os.environ["A44_BENCH_CPROFILE"])
    else:
        asyncio.run(main(sys.argv[1], int(sys.argv[2])))
