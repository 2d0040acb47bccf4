"""Atomic publish of a partition's output (docs/rows.md "Atomic publish"), with real daemons: the example
`examples/workflows/daily-publish.yaml` stages a day and swaps it into `daily_orders` in one statement. A daemon
killed with `kill -9` while the swap is in flight leaves readers of the application database seeing the previous
version of the day or the new one, never a mix or an empty day; a second daemon completes the run, and its row
summary is right. The same workflow over an empty day fails its expectation and publishes nothing."""

import asyncio
import json
from datetime import date
from pathlib import Path

import asyncpg

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.compiler.lint import lint_paths
from anthares44.automation.runtime.store.core import Store
from tests.runtime.daemon_support import ServeProcess, wait_until
from tests.runtime.pg import database_name, query, with_database

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workflows" / "daily-publish.yaml"
DAY, EMPTY_DAY, N = "2026-07-04", "2026-07-05", 200
OLD, NEW = (3, 3), (N, N * (N + 1) // 2)          # (rows, sum of amount) of the day before / after the publish
TABLES = """
create table orders_raw (day date, order_id bigint, amount numeric);
create table daily_orders_staging (run_id text, day date, order_id bigint, amount numeric);
create table daily_orders (day date, order_id bigint, amount numeric);
insert into daily_orders select '2026-07-04', g, 1 from generate_series(1, 3) g;
insert into orders_raw select '2026-07-04', g, g from generate_series(1, 200) g;
"""


async def _setup(url: str, app_url: str, home: Path) -> list[str]:
    (ir,) = lint_paths([str(EXAMPLE)], lower=True).irs.values()
    conn = await asyncpg.connect(app_url)
    await conn.execute(TABLES)
    await conn.close()
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.migrate()
        await store.ensure_partitions()
        await store.publish_version("pj_default", ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        return [(await store.create_run("pj_default", ir.workflow_id, {"day": day}, f"k-{day}")).run_id
                for day in (DAY, EMPTY_DAY)]
    finally:
        await store.close()


def _fetchrow(url: str, sql: str, *args):
    return query(url, sql, *args)[0]


def test_kill_9_mid_swap_leaves_the_old_or_the_new_day_visible_never_half(pg_url, app_url, app_dbs, pg_admin_url,
                                                                          tmp_path):
    template, app_url = app_url, app_dbs.url()
    # the server's view of the project's sessions (the project's role may not list them)
    sessions_url = with_database(pg_admin_url, database_name(app_url))
    run_id, empty_id = asyncio.run(_setup(pg_url, app_url, tmp_path))
    seen: set[tuple[int, int]] = set()

    def observe():
        r = _fetchrow(app_url, "select count(*)::int as n, coalesce(sum(amount), 0)::int as s from daily_orders "
                               "where day = $1", date.fromisoformat(DAY))
        seen.add((r["n"], r["s"]))

    def swap_waiting() -> bool:
        observe()
        r = _fetchrow(sessions_url, "select count(*)::int as n from pg_stat_activity where query like '%moved as%' "
                               "and wait_event_type = 'Lock' and pid <> pg_backend_pid()")
        return r["n"] > 0

    holder = asyncio.new_event_loop()
    lock = holder.run_until_complete(asyncpg.connect(app_url))
    # a reader-friendly lock (SHARE: reads go on, writes wait) holds the swap in flight so the kill lands mid-swap
    holder.run_until_complete(lock.execute("begin; lock table daily_orders in share mode"))
    first = ServeProcess(pg_url, tmp_path, worker_id="first", app_url=template)
    second = None
    try:
        wait_until(swap_waiting, 60, "the swap to be in flight")
        first.kill9()
        observe()
        holder.run_until_complete(lock.execute("commit"))
        second = ServeProcess(pg_url, tmp_path, worker_id="second", app_url=template)
        wait_until(lambda: observe() or _state(pg_url, run_id) == "succeeded", 60,
                   "the second daemon to complete the run")
        wait_until(lambda: _state(pg_url, empty_id) == "failed", 60, "the empty day to fail")
    finally:
        holder.run_until_complete(lock.close())
        holder.close()
        for p in (first, second):
            if p is not None:
                p.stop()
    observe()
    assert seen <= {OLD, NEW} and NEW in seen, seen          # never a half-written or empty day
    assert _fetchrow(app_url, "select count(*)::int as n from daily_orders_staging")["n"] == 0
    run = _fetchrow(pg_url, "select summary, error_code from automation.runs where run_id = $1", run_id)
    summary = json.loads(run["summary"])
    assert (summary["rows_in"], summary["rows_out"]) == (N, N)
    empty = _fetchrow(pg_url, "select error_code, failed_step, error_message from automation.runs "
                              "where run_id = $1", empty_id)
    assert (empty["error_code"], empty["failed_step"]) == ("E_EXPECTATION_FAILED", "stage")
    assert "rows.in = 0" in empty["error_message"]


def _state(url: str, run_id: str) -> str:
    return _fetchrow(url, "select state from automation.runs where run_id = $1", run_id)["state"]
