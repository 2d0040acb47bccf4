"""Group commit across runs (engine/committer.py, migration 0020): the transitions of every run ready at once go
to PostgreSQL as one `engine_commit_many` statement, each run's transition all or nothing on its own."""

import asyncio
from datetime import timedelta

import asyncpg
import pytest

from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.engine.committer import MAX_GROUP, SECOND_GROUP, Committer, synchronous_commit
from anthares44.automation.runtime.engine.daemon import WorkerSettings
from anthares44.automation.runtime.engine.journal import Batch, Lease, LeaseLost
from anthares44.automation.settings import Settings
from tests.runtime.engine_support import engine, node, publish_and_run, run_row, workflow
from tests.runtime.pg import query


def _leases(store, clock, aio, n: int) -> list[Lease]:
    ir = workflow([node("a")], name="gc")
    for i in range(n):
        aio(publish_and_run(store, ir, key=f"k{i}"))
    eng = engine(store, clock=clock, concurrency=n)
    rows = aio(eng.claim())
    assert len(rows) == n
    return [Lease(r["run_id"], r["project_id"], r["workflow_id"], eng.worker_id, r["lease_grants"], r["epoch"])
            for r in rows]


async def _together(*commits):
    """The commits of several runs made ready in the same instant (one event-loop turn)."""
    return await asyncio.gather(*commits, return_exceptions=True)


def _started(store, lease: Lease, committer, at) -> Batch:
    b = Batch(store, lease, lease.owner, committer=committer)
    b.start("a", 1, "action", at)
    return b


def test_one_statement_commits_the_good_runs_and_refuses_the_lost_and_the_illegal(store, pg_url, clock, aio):
    good, lost, illegal, good2 = _leases(store, clock, aio, 4)
    c = Committer(store)
    now = clock.now()
    stolen = Lease(lost.run_id, lost.project_id, lost.workflow_id, "another-worker", lost.grant + 1, lost.epoch)
    batches = [_started(store, good, c, now), _started(store, stolen, c, now), _started(store, illegal, c, now),
               _started(store, good2, c, now)]
    batches[2].transition("compensation_failed", now)     # running -> compensation_failed is not allowed
    got = aio(_together(*(b.commit(now) for b in batches)))
    assert (c.statements, c.transitions, c.alone) == (1, 4, 0)   # one statement carried all four
    assert got[0] is None and got[3] is None
    assert isinstance(got[1], LeaseLost)
    assert isinstance(got[2], A44Error) and got[2].code == "E_ILLEGAL_TRANSITION" and got[2].details == {
        "from": "running", "to": "compensation_failed", "run_id": illegal.run_id}
    for L, written in ((good, True), (lost, False), (illegal, False), (good2, True)):
        rows = query(pg_url, "select status from automation.step_attempts where run_id = $1", L.run_id)
        assert [r["status"] for r in rows] == (["running"] if written else []), L.run_id
        assert aio(run_row(store, L.run_id))["state"] == "running"
    # the refused ones wrote nothing, not even the fence's current_step; the good ones did
    assert aio(run_row(store, good.run_id))["current_step"] == "a"
    assert aio(run_row(store, illegal.run_id))["current_step"] is None


def test_a_runs_own_error_is_raised_as_alone_and_the_group_still_commits(store, pg_url, clock, aio):
    """An error that is not a refusal (here a bug: an operation kind without its function) rolls back that run's
    subtransaction only; the run is retried alone and gets the error it would have got without group commit."""
    ok, broken = _leases(store, clock, aio, 2)
    c = Committer(store)
    now = clock.now()
    b1, b2 = _started(store, ok, c, now), _started(store, broken, c, now)
    b2._ops.append(("no_such_kind", {"run_id": broken.run_id}))
    got = aio(_together(b1.commit(now), b2.commit(now)))
    assert got[0] is None
    assert isinstance(got[1], A44Error) and got[1].code == "E_DB_SCHEMA", got[1]
    assert (c.statements, c.alone) == (1, 1)
    assert len(query(pg_url, "select 1 from automation.step_attempts where run_id = $1", ok.run_id)) == 1
    assert query(pg_url, "select 1 from automation.step_attempts where run_id = $1", broken.run_id) == []


def test_groups_are_bounded_and_a_lone_transition_commits_at_once(store, pg_url, clock, aio):
    leases = _leases(store, clock, aio, MAX_GROUP + 6)
    c = Committer(store)
    now = clock.now()
    assert aio(_together(*(_started(store, L, c, now).commit(now) for L in leases))) == [None] * len(leases)
    assert (c.statements, c.transitions) == (2, MAX_GROUP + 6)      # 64 + 6: never more subtransactions than 64
    b = Batch(store, leases[0], leases[0].owner, committer=c)
    b.event("run.alert", now, message="alone")
    aio(asyncio.wait_for(b.commit(now), 5))          # idle: no timer to wait out, one more statement
    assert c.statements == 3
    assert query(pg_url, "select count(*) as n from automation.step_attempts where status = 'running'")[0]["n"] \
        == MAX_GROUP + 6


@pytest.mark.parametrize("max_in_flight, late, peak", [(2, SECOND_GROUP + 4, 2), (2, SECOND_GROUP - 6, 1),
                                                      (1, SECOND_GROUP + 4, 1)])
def test_a_second_group_goes_out_while_one_is_in_flight_only_when_it_is_worth_a_commit(
        store, pg_url, clock, aio, max_in_flight, late, peak):
    """While a full group is on its way, transitions that arrive gather; once SECOND_GROUP of them wait, they
    leave as a second statement at once (two PostgreSQL backends work) instead of waiting for the first."""
    leases = _leases(store, clock, aio, MAX_GROUP + late)
    c = Committer(store, max_in_flight=max_in_flight)
    now = clock.now()

    async def scenario():
        first = [asyncio.ensure_future(_started(store, L, c, now).commit(now)) for L in leases[:MAX_GROUP]]
        while c.in_flight == 0:             # the first group's statement has left
            await asyncio.sleep(0)
        second = [asyncio.ensure_future(_started(store, L, c, now).commit(now)) for L in leases[MAX_GROUP:]]
        return await asyncio.gather(*first, *second)

    assert aio(asyncio.wait_for(scenario(), 30)) == [None] * len(leases)
    assert (c.statements, c.transitions, c.peak_in_flight, c.in_flight) == (2, len(leases), peak, 0)
    assert query(pg_url, "select count(*) as n from automation.step_attempts where status = 'running'")[0]["n"] \
        == len(leases)


def test_a_groups_notifications_ride_in_its_own_transaction(store, pg_url, clock, aio):
    """The run ids of the applied batches on a44_run_events and the earliest release on a44_runs_due arrive with
    the group's commit, from the group's statement (no engine_notify after it); a refused run notifies nothing."""
    done, released, lost = _leases(store, clock, aio, 3)
    c = Committer(store)
    now = clock.now()
    stolen = Lease(lost.run_id, lost.project_id, lost.workflow_id, "another-worker", lost.grant + 1, lost.epoch)
    wake = now + timedelta(minutes=5)
    b1, b2, b3 = (_started(store, L, c, now) for L in (done, released, stolen))
    b2.transition("waiting", now, next_wake_at=wake, release=True)
    got: list[tuple[str, str]] = []
    sent: list[str] = []

    async def scenario():
        listen = await asyncpg.connect(pg_url)
        arrived = asyncio.Event()

        def on(conn, pid, channel, payload):
            got.append((channel, payload))
            arrived.set()

        await listen.add_listener("a44_run_events", on)
        await listen.add_listener("a44_runs_due", on)
        original = store.fetchval

        async def fetchval(name, **kw):
            sent.append(name)
            return await original(name, **kw)

        store.fetchval = fetchval
        try:
            outcome = await _together(b1.commit(now), b2.commit(now), b3.commit(now))
            while len(got) < 3:
                arrived.clear()
                await asyncio.wait_for(arrived.wait(), 5)
            await asyncio.sleep(0.2)            # nothing else arrives
        finally:
            store.fetchval = original
            await listen.close()
        return outcome

    outcome = aio(scenario())
    assert outcome[:2] == [None, None] and isinstance(outcome[2], LeaseLost)
    assert sorted(got) == sorted([("a44_run_events", done.run_id), ("a44_run_events", released.run_id),
                                  ("a44_runs_due", str(int(wake.timestamp() * 1000)))]), got
    assert sent == ["engine_commit_many"], sent


def test_synchronous_commit_off_is_applied_to_the_engine_transaction_only(store, pg_url, clock, aio, tmp_path):
    """The test server runs with synchronous_commit off; the database is set to on, as a product server is."""
    from anthares44.automation.runtime.store.core import Store

    query(pg_url, """
        create function automation.engine_op_test_sync(op jsonb) returns void language sql as $$
            insert into automation.run_events (run_id, project_id, at, kind, message)
            select r.run_id, r.project_id, now(), 'test.sync', current_setting('synchronous_commit')
            from automation.runs r where r.run_id = op ->> 'run_id' $$""")
    query(pg_url, "do $$ begin execute format('alter database %I set synchronous_commit = on', "
                  "current_database()); end $$")
    (L,) = _leases(store, clock, aio, 1)

    async def scenario():
        s = await Store.connect(pg_url, clock=clock, min_size=1, max_size=1, results_dir=tmp_path)
        try:
            for durable in (True, False, True):        # one pooled connection: the setting must not stick
                b = Batch(s, L, L.owner, committer=Committer(s, synchronous_commit=durable))
                b._ops.append(("test_sync", {"run_id": L.run_id}))
                await b.commit(clock.now())
        finally:
            await s.close()

    aio(scenario())
    seen = [e["message"] for e in aio(store.list_run_events(L.run_id)) if e["kind"] == "test.sync"]
    assert seen == ["on", "off", "on"]


def test_a_bad_synchronous_commit_setting_is_refused():
    assert synchronous_commit(Settings()) is True
    assert synchronous_commit(Settings(synchronous_commit="OFF")) is False
    with pytest.raises(A44Error) as exc:
        WorkerSettings.from_settings(Settings(synchronous_commit="sometimes"))
    assert exc.value.code == "E_SYNCHRONOUS_COMMIT"
