"""What the runtime's speed work must not change (docs/runtime.md, "Performance"): a `pass` step is written once,
already finished, in the transaction of the transition that made it ready, while a step with an external effect
still gets its `running` row first; deferred NOTIFYs (migration 0006) still reach listeners; the pool skips
asyncpg's reset statement only after session-neutral uses."""

import asyncio

import asyncpg

from anthares44.automation.runtime.store.core import Store
from tests.runtime.engine_support import PROJECT, Script, attempts, engine, node, publish_and_run, run_row, workflow


def _events(store, aio, run_id):
    return [(e["kind"], e["step_id"], e["status"]) for e in aio(store.list_run_events(run_id))
            if e["kind"].startswith("attempt.")]


def test_pass_step_is_one_finished_attempt_row_and_an_effect_step_is_written_before_it_runs(store, clock, aio):
    s = Script()
    ir = workflow([node("p1", uses="pass", params={"output": {"n": 1}}),
                   node("p2", uses="pass", params={"output": {"$tpl": "{{ steps.p1.output.n }}-x"}}),
                   node("call"),
                   node("p3", uses="pass", params={"output": {"$tpl": "{{ steps.call.output.step }}"}})])
    run_id = aio(publish_and_run(store, ir))
    eng = engine(store, s, clock=clock)
    assert aio(eng.drive()) == {run_id: "succeeded"}
    order = ["p1", "p2", "call", "p3"]      # the ManualClock does not move: sort by step, not by started_at
    rows = sorted(aio(store.list_attempts(run_id)), key=lambda r: order.index(r["step_id"]))
    assert [(r["step_id"], r["attempt"], r["status"]) for r in rows] == [
        ("p1", 1, "succeeded"), ("p2", 1, "succeeded"), ("call", 1, "succeeded"), ("p3", 1, "succeeded")]
    for r in rows:
        assert r["started_at"] is not None and r["finished_at"] is not None and r["finished_at"] >= r["started_at"]
        assert r["idempotency_key"] == f"{run_id}:{r['step_id']}"
    assert [r["result"] for r in rows if r["step_id"] != "call"] == [{"n": 1}, "1-x", "call"]
    # pass steps: one attempt.finished each, no attempt.started; the effect step: started (committed) first
    assert _events(store, aio, run_id) == [
        ("attempt.finished", "p1", "succeeded"), ("attempt.finished", "p2", "succeeded"),
        ("attempt.started", "call", "running"), ("attempt.finished", "call", "succeeded"),
        ("attempt.finished", "p3", "succeeded")]
    assert aio(run_row(store, run_id))["result"] == {"p3": "call"}


def test_call_step_row_is_committed_before_the_connector_runs(store, clock, aio):
    """The effect step's `running` row is visible to another connection while the connector is still blocked."""
    s = Script(plan={"call": ["block:go"]})
    ir = workflow([node("p1", uses="pass", params={"output": 1}), node("call")])
    run_id = aio(publish_and_run(store, ir))
    eng = engine(store, s, clock=clock)

    async def scenario():
        driving = asyncio.create_task(eng.run_once())
        for _ in range(200):
            await asyncio.sleep(0.01)
            if s.calls:
                break
        seen = [(a["step_id"], a["status"]) for a in await store.list_attempts(run_id)]
        s.events["go"].set()
        await driving
        return seen

    assert sorted(aio(scenario())) == [("call", "running"), ("p1", "succeeded")]
    assert aio(run_row(store, run_id))["state"] == "succeeded"


def test_pass_steps_complete_in_order_for_compensation(store, clock, aio):
    """Completion order (reverse-order compensation) sees the inline pass records."""
    s = Script(plan={"b": ["perm"]})
    ir = workflow([node("a", uses="pass", params={"output": 1}, compensate="script"), node("b")])
    run_id = aio(publish_and_run(store, ir))
    eng = engine(store, s, clock=clock)
    aio(eng.drive())
    from datetime import timedelta
    for _ in range(3):
        clock.advance(timedelta(seconds=61))
        aio(eng.drive())
    assert aio(run_row(store, run_id))["state"] == "failed"
    assert ("a", "compensation", 1, "compensated", None) in aio(attempts(store, run_id))


def test_failing_pass_step_records_one_failed_attempt(store, clock, aio):
    ir = workflow([node("p", uses="pass", params={"output": {"$tpl": "{{ steps.nope.output.x }}"}})])
    run_id = aio(publish_and_run(store, ir))
    assert aio(engine(store, clock=clock).drive()) == {run_id: "failed"}
    rows = aio(store.list_attempts(run_id))
    assert len(rows) == 1 and rows[0]["status"] == "failed" and rows[0]["error_code"]
    assert rows[0]["finished_at"] is not None
    run = aio(run_row(store, run_id))
    assert run["failed_step"] == "p" and run["error_code"] == rows[0]["error_code"]


def test_deferred_notifications_reach_followers_and_daemons(store, pg_url, clock, aio):
    """Step transactions do not NOTIFY from the trigger (0006); the engine sends a44_run_events (run id) and
    a44_runs_due (earliest due time, epoch ms) right after commit."""
    from datetime import timedelta

    ir = workflow([node("p", uses="pass", params={"output": 1}), node("nap", sleep_ms=3_600_000)], name="nap")
    got: list[tuple[str, str]] = []

    async def scenario():
        conn = await asyncpg.connect(pg_url)
        await conn.add_listener("a44_run_events", lambda c, pid, ch, payload: got.append((ch, payload)))
        await conn.add_listener("a44_runs_due", lambda c, pid, ch, payload: got.append((ch, payload)))
        run_id = await publish_and_run(store, ir)
        await asyncio.sleep(0.1)
        got.clear()                       # creation notified from the trigger, as before
        outcome = await engine(store, clock=clock).drive()
        for _ in range(100):
            if ("a44_runs_due", str(int((clock.now() + timedelta(hours=1)).timestamp() * 1000))) in got:
                break
            await asyncio.sleep(0.02)
        await conn.close()
        return run_id, outcome

    run_id, outcome = aio(scenario())
    assert outcome == {run_id: "sleeping"}
    assert ("a44_run_events", run_id) in got
    assert ("a44_runs_due", str(int((clock.now() + timedelta(hours=1)).timestamp() * 1000))) in got


def test_pool_reset_is_skipped_only_after_session_neutral_uses(pg_url, clock, aio, tmp_path):
    async def scenario():
        s = await Store.connect(pg_url, clock=clock, min_size=1, max_size=1, results_dir=tmp_path)
        try:
            assert s.pool is s._pool
            # a (misbehaving) block that vouched for being neutral: no reset statement, so its SET survives
            async with s.connection("t1", session_neutral=True) as c:
                await c.execute("set application_name = 'probe'")
            async with s.connection("t2") as c:                       # a raw use: full reset after it
                kept = await c.fetchval("select current_setting('application_name')")
                await c.execute("listen some_channel")
                await c.execute("set application_name = 'dirty'")
            async with s.connection("t3") as c:
                after = await c.fetchval("select current_setting('application_name')")
                channels = await c.fetch("select pg_listening_channels()")
            # a pool connection borrowed directly (as sql/execute does) is reset too
            async with s.pool.acquire() as c:
                await c.execute("set application_name = 'borrowed'")
            version = await s.fetchval("server_version")            # named query: neutral, still works
            async with s.connection("t4") as c:
                borrowed_after = await c.fetchval("select current_setting('application_name')")
            return kept, after, channels, borrowed_after, version
        finally:
            await s.close()

    kept, after, channels, borrowed_after, version = aio(scenario())
    assert kept == "probe"
    assert after == "a44" and channels == []
    assert borrowed_after == "a44" and version


def test_commits_per_run_bound(pg_url, clock, aio, tmp_path):
    """A 3-step `pass` run costs one engine transaction, plus its share of the batch's claim."""
    from tests.runtime.engine_support import count_transactions

    ir = workflow([node(x, uses="pass", params={"output": i}) for i, x in enumerate("abc")], name="cpr")
    n = 30

    async def scenario():
        s = await Store.connect(pg_url, clock=clock, min_size=1, max_size=4, results_dir=tmp_path)
        try:
            for i in range(n):
                await publish_and_run(s, ir, key=f"k{i}")
            counting = count_transactions(s)
            await engine(s, clock=clock, concurrency=n).drive()
            counts = dict(counting)
            states = {(await s.get_run(r["run_id"]))["state"] for r in
                      (await s.list_runs(PROJECT, workflow=ir.workflow_id, limit=n)).runs}
            return counts, states
        finally:
            await s.close()

    counts, states = aio(scenario())
    assert states == {"succeeded"}
    # at most one per run (three records and the final transition), runs ready together in one group commit
    assert "engine_commit" not in counts and 1 <= counts["engine_commit_many"] <= n
    assert counts.get("engine_notify", 0) <= n             # batched after commit, never more than one per run
    assert (sum(counts.values()) - counts.get("engine_notify", 0)) / n <= 1.15     # + the claim and the IR read
