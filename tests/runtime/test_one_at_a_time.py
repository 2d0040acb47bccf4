"""The one-run-at-a-time path (issue 16): a claim is one statement (migration 0020), a daemon whose last claim
left nothing due does not claim again when a run ends, a run's terminal notification is not held by the
Notifier's interval, and none of it makes the daemon miss a run that becomes due (created while it is busy, a
retry, a sleep, a slot freed under a workflow's concurrency.max). Round trips are counted on the daemon's own
pooled connections (asyncpg wrapped)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from contextlib import contextmanager
from datetime import timedelta

import asyncpg
import asyncpg.connection

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import ConcurrencyIR, seal, to_json
from anthares44.automation.runtime.engine import Daemon, WorkerSettings
from anthares44.automation.runtime.engine.journal import Notifier
from anthares44.automation.runtime.store.core import Store
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.runtime.engine_support import PROJECT, Script, engine, node, publish_and_run, watch_statements, workflow

TERMINAL = ("succeeded", "failed", "compensation_failed", "cancelled", "partial")


@contextmanager
def round_trips():
    """Round trips per asyncpg connection: simple queries (BEGIN, COMMIT, resets) by first word, parameterised
    statements by the named query they run ('claim', 'next_due', 'commit', 'notify', 'other')."""
    seen: dict[int, Counter[str]] = {}

    def note(conn, q):
        name = q if " " not in q else "other"
        for needle, kind in (("automation.lease_claim(", "claim"),
                             ("min(next_wake_at)", "next_due"), ("automation.engine_commit", "commit"),
                             ("pg_notify(", "notify")):
            if needle in q:
                name = kind
                break
        seen.setdefault(id(conn), Counter())[name] += 1

    with watch_statements(note):
        yield seen


def of_pool(seen: dict[int, Counter[str]], store: Store) -> Counter[str]:
    ids = {id(h._con) for h in store.pool._holders if h._con is not None}
    total: Counter[str] = Counter()
    for cid, c in seen.items():
        if cid in ids:
            total.update(c)
    return total


def test_a_claim_is_one_statement(store, clock, aio):
    ir = workflow([node("a", uses="pass", params={"output": 1})], name="claim1")
    aio(publish_and_run(store, ir))
    eng = engine(store, clock=clock)
    aio(eng.claim(1))          # the statement is prepared on this connection; counted from the next call
    aio(publish_and_run(store, ir, key="k2"))
    with round_trips() as seen:
        rows = aio(eng.claim(1))
    counted = sum(seen.values(), Counter())
    assert len(rows) == 1 and rows[0]["state"] == "running" and rows[0]["prev_state"] == "pending"
    assert counted == Counter(claim=1), counted          # no BEGIN, lock, COMMIT: one autocommit statement


def test_a_terminal_notification_is_not_held_by_the_interval(store, clock, aio):
    """A run's last commit notifies at once even right after another notification; others keep the interval."""
    sent: list[float] = []

    class Timed(Notifier):
        MIN_INTERVAL_S = 0.5        # long enough that a held notification cannot pass for an immediate one

    async def scenario():
        n = Timed(store)
        original = store.fetchval

        async def fetchval(name, **kw):
            if name == "engine_notify":
                sent.append(time.perf_counter())
            return await original(name, **kw)

        store.fetchval = fetchval
        t0 = time.perf_counter()
        n.add(["r1"])
        await asyncio.sleep(0.05)
        n.add(["r2"], at_once=True)        # a terminal state, 50 ms after the first notification
        await n.drain()
        n.add(["r3"])                      # not terminal: waits out the interval after r2's
        await n.drain()
        return [s - t0 for s in sent]

    at = aio(scenario())
    assert len(at) == 3
    assert at[1] - at[0] < 0.3, at           # not held until 0.5 s after the first
    assert at[2] - at[1] >= 0.45, at         # the interval still applies to the rest


def test_one_run_at_a_time_costs_three_round_trips_and_nothing_due_is_missed(pg_url, aio, tmp_path):
    """A daemon driving 3-step `pass` runs one at a time sends, per run, one claim, one lease_next_due and one
    engine_commit, whose transaction carries the run's notifications (migration 0026): no statement of its own to
    notify, no empty claim (and its lease_next_due) when the run ends. The same
    daemon still picks up at once a run created while it is busy, wakes a retry and a sleep on time, and claims
    the next run of a workflow at concurrency.max = 1 as soon as its predecessor ends."""
    script = Script(plan={"held": ["block:go"], "flaky": ["retry"]})
    n = 12

    async def scenario():
        admin = await Store.connect(pg_url, clock=SystemClock(), results_dir=tmp_path / "admin", max_size=4)
        st = await Store.connect(pg_url, clock=SystemClock(), results_dir=tmp_path / "d", max_size=6)
        reg = ConnectorRegistry()
        reg.register(script)
        daemon = Daemon(WorkerSettings(database_url=pg_url, worker_id="one", concurrency=8, schedules=False,
                                       lease_timeout=timedelta(seconds=20)), store=st, registry=reg)
        passes = workflow([node(x, uses="pass", params={"output": i}) for i, x in enumerate("abc")], name="one3")
        held = workflow([node("held")], name="held")
        flaky = workflow([node("flaky", retry=(2, "fixed"), base_ms=200)], name="flaky")
        nap = workflow([node("nap", sleep_ms=400), node("after", uses="pass", params={"output": 1})], name="nap")
        single = seal(workflow([node("held")], name="single").model_copy(update={"concurrency": ConcurrencyIR(max=1)}))

        async def finished(run_id, within: float) -> float:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < within:
                if (await admin.get_run(run_id))["state"] in TERMINAL:
                    return time.perf_counter() - t0
                await asyncio.sleep(0.01)
            raise AssertionError(f"{run_id} not finished within {within}s: {await admin.get_run(run_id)}")

        for ir in (passes, held, flaky, nap, single):
            await admin.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        serving = asyncio.create_task(daemon.serve())
        try:
            probe = await asyncpg.connect(pg_url)
            try:        # LISTENing on both channels (runs_due, then run_cancel), its first claim made
                while not await probe.fetchval("select count(*) from pg_stat_activity where datname = "
                                               "current_database() and query like 'LISTEN%a44_run%'"):
                    await asyncio.sleep(0.02)
            finally:
                await probe.close()
            await asyncio.sleep(0.3)
            with round_trips() as seen:
                for i in range(n):
                    rid = (await admin.create_run(PROJECT, passes.workflow_id, {}, f"p{i}")).run_id
                    await finished(rid, 5)
                    await asyncio.sleep(0.02)          # idle between runs
                counted = of_pool(seen, st)
            # busy: a run held in its step; another created meanwhile finishes while the first still waits
            h = (await admin.create_run(PROJECT, held.workflow_id, {}, "h")).run_id
            while not script.called("held"):
                await asyncio.sleep(0.01)
            p = (await admin.create_run(PROJECT, passes.workflow_id, {}, "busy")).run_id
            took = {"created while busy": await finished(p, 2)}
            assert (await admin.get_run(h))["state"] == "running"
            script.events["go"].set()
            await finished(h, 2)
            f = (await admin.create_run(PROJECT, flaky.workflow_id, {}, "f")).run_id     # retry after 200 ms
            took["retry"] = await finished(f, 3)
            s = (await admin.create_run(PROJECT, nap.workflow_id, {}, "s")).run_id       # sleep 400 ms
            took["sleep"] = await finished(s, 3)
            # concurrency.max = 1: the second waits for the first, then is claimed when it ends (no NOTIFY says
            # so: the daemon's check after its claim found it due and left)
            script.events["go"].clear()
            script.plan["held"] = ["block:go"]
            a = (await admin.create_run(PROJECT, single.workflow_id, {}, "a")).run_id
            while script.called("held") < 2:
                await asyncio.sleep(0.01)
            b = (await admin.create_run(PROJECT, single.workflow_id, {}, "b")).run_id
            await asyncio.sleep(0.3)
            assert (await admin.get_run(b))["state"] == "pending"
            script.events["go"].set()
            await finished(a, 2)
            took["next under concurrency.max"] = await finished(b, 3)
        finally:
            daemon.request_stop()
            await serving
            await st.close()
            await admin.close()
        return counted, took

    counted, took = aio(scenario())
    print("daemon round trips over", n, "runs:", dict(counted), "waits:", took)
    assert counted["claim"] == n, counted           # one claim per run, no empty claim after it ended
    assert counted["next_due"] <= n, counted
    assert counted["commit"] == n and counted.get("begin", 0) == 0, counted
    assert counted.get("notify", 0) == 0, counted
    # the rest ('other') is the queue expiry sweep, at most once a second, and heartbeats every 10 s
    assert sum(v for k, v in counted.items() if k != "other") <= 3 * n, counted
    assert took["retry"] >= 0.2 and took["sleep"] >= 0.4, took
    assert all(t < 2.0 for t in took.values()), took


def test_the_daemon_warms_its_pool_before_serving(pg_url, aio, tmp_path):
    """Once start() returns (readiness), every pooled connection is open and has prepared the hot path's
    statements: the first runs neither connect nor prepare."""
    prepared: Counter[str] = Counter()

    async def scenario():
        st = await Store.connect(pg_url, clock=SystemClock(), results_dir=tmp_path / "d", min_size=1, max_size=5)
        daemon = Daemon(WorkerSettings(database_url=pg_url, worker_id="warm", concurrency=4, schedules=False),
                        store=st)
        admin = await Store.connect(pg_url, clock=SystemClock(), results_dir=tmp_path / "a", max_size=2)
        ir = workflow([node("a", uses="pass", params={"output": 1})], name="warm")
        await admin.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        try:
            await daemon.start()
            sizes = st.pool.get_size(), st.pool.get_idle_size()
            C = asyncpg.connection.Connection
            original = C._get_statement

            async def get_statement(self, query, timeout, **kw):
                before = len(self._stmt_cache)
                got = await original(self, query, timeout, **kw)
                if len(self._stmt_cache) != before:
                    prepared[query] += 1
                return got

            C._get_statement = get_statement
            try:
                serving = asyncio.create_task(daemon.serve())
                await asyncio.sleep(0.3)
                for i in range(4):
                    rid = (await admin.create_run(PROJECT, ir.workflow_id, {}, f"w{i}")).run_id
                    while (await admin.get_run(rid))["state"] != "succeeded":
                        await asyncio.sleep(0.01)
                daemon.request_stop()
                await serving
            finally:
                C._get_statement = original
        finally:
            await st.close()
            await admin.close()
        return sizes

    sizes = aio(scenario())
    assert sizes == (5, 5)
    hot = [q for q in prepared if any(k in q for k in ("automation.lease_claim(", "automation.engine_commit_v2(",
                                                       "pg_notify(", "min(next_wake_at)"))]
    assert not hot, hot
