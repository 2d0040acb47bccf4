"""create_run and the §8.2 idempotency window; list_runs filters; the run event log and its NOTIFY."""

import asyncio
from datetime import timedelta

import asyncpg
import pytest

from anthares44.automation.errors import E_IDEMPOTENCY_KEY_REQUIRED, E_RUN_NOT_FOUND, E_WORKFLOW_NOT_FOUND, A44Error

P = "pj_default"


@pytest.fixture
def wf(store, aio):
    aio(store.publish_version(P, "wf_invoice_settle", 3, "a" * 64, {"ir_version": 1}))
    return "wf_invoice_settle"


def test_create_run_records_a_pending_run_and_its_event(store, wf, aio, clock):
    rid, created, age, version = aio(store.create_run(P, wf, {"invoiceId": "inv_1"}, "k1", trigger_id="tr_manual",
                                                      partition_key="cust_1", queue="billing"))
    assert created and age == 0 and version == 3 and rid.startswith("run_")
    run = aio(store.get_run(rid))
    assert run["state"] == "pending" and run["input"] == {"invoiceId": "inv_1"}
    assert (run["trigger_id"], run["partition_key"], run["queue"]) == ("tr_manual", "cust_1", "billing")
    assert run["created_at"] == clock.now() and run["next_wake_at"] == clock.now()
    assert run["deadline_at"] == clock.now() + timedelta(hours=72)
    events = aio(store.list_run_events(rid))
    assert [(e["kind"], e["state"]) for e in events] == [("run.created", "pending")]


def test_idempotency_window_24h(store, wf, aio, clock):
    first = aio(store.create_run(P, wf, {"n": 1}, "invoice:inv_8812:finalized:v1"))
    clock.advance(timedelta(hours=23, minutes=59))
    again = aio(store.create_run(P, wf, {"n": 2}, "invoice:inv_8812:finalized:v1"))
    assert again.run_id == first.run_id and not again.created
    assert again.key_age_seconds == pytest.approx(23 * 3600 + 59 * 60)
    assert aio(store.list_runs(P)).total == 1  # nothing created
    clock.advance(timedelta(minutes=1))  # 24 h: the key is recycled
    recycled = aio(store.create_run(P, wf, {"n": 3}, "invoice:inv_8812:finalized:v1"))
    assert recycled.created and recycled.run_id != first.run_id
    assert aio(store.list_runs(P)).total == 2


def test_concurrent_creates_with_one_key_make_one_run(store, wf, aio):
    async def body():
        return await asyncio.gather(*(store.create_run(P, wf, {"i": i}, "same-key") for i in range(30)))

    results = aio(body())
    assert sum(r.created for r in results) == 1
    assert len({r.run_id for r in results}) == 1
    assert aio(store.list_runs(P)).total == 1


def test_create_run_refusals(store, wf, aio):
    for key in ("", "   "):
        with pytest.raises(A44Error) as exc:
            aio(store.create_run(P, wf, {}, key))
        assert exc.value.code == E_IDEMPOTENCY_KEY_REQUIRED
    with pytest.raises(A44Error) as exc:
        aio(store.create_run(P, "wf_unknown", {}, "k"))
    assert exc.value.code == E_WORKFLOW_NOT_FOUND
    with pytest.raises(A44Error) as exc:
        aio(store.create_run(P, wf, {}, "k", version=9))
    assert exc.value.code == E_WORKFLOW_NOT_FOUND
    # a refused create claimed nothing: the key is still free
    assert aio(store.create_run(P, wf, {}, "k")).created
    with pytest.raises(A44Error) as exc:
        aio(store.get_run("run_01J9XQ"))
    assert exc.value.code == E_RUN_NOT_FOUND


def test_list_runs_filters_and_total(store, wf, aio, clock):
    aio(store.publish_version(P, "wf_other", 1, "b" * 64, {}))
    old = aio(store.create_run(P, wf, {}, "old")).run_id
    clock.advance(timedelta(hours=72))
    ids = [aio(store.create_run(P, wf, {}, f"k{i}")).run_id for i in range(5)]
    other = aio(store.create_run(P, "wf_other", {}, "o")).run_id
    ref = aio(store.record_attempt_start(ids[0], "provision-db", 1, project=P))
    aio(store.record_attempt_finish(ref, "failed", error_code="E_UPSTREAM_503"))

    page = aio(store.list_runs(P, limit=3))
    assert page.total == 7 and len(page.runs) == 3
    assert page.runs[0]["run_id"] == other  # newest first
    assert aio(store.list_runs(P, workflow="wf_other")).total == 1
    assert aio(store.list_runs(P, since=timedelta(hours=48))).total == 6
    assert old not in [r["run_id"] for r in aio(store.list_runs(P, since=timedelta(hours=48))).runs]
    by_step = aio(store.list_runs(P, step="provision-db"))
    assert by_step.total == 1 and by_step.runs[0]["run_id"] == ids[0]
    assert aio(store.list_runs(P, state="pending")).total == 7
    assert aio(store.list_runs(P, state="failed")).total == 0
    assert aio(store.list_runs("pj_nobody")).total == 0


def test_run_events_append_and_notify(store, wf, aio, pg_url):
    rid = aio(store.create_run(P, wf, {}, "k")).run_id

    async def body():
        got = asyncio.Queue()
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.add_listener("a44_run_events", lambda *args: got.put_nowait(args[3]))
            first = await store.append_run_event(rid, P, "run.state", state="running", data={"worker": "w1"})
            payload = await asyncio.wait_for(got.get(), 5)
        finally:
            await conn.close()
        later = await store.append_run_event(rid, P, "run.state", state="succeeded")
        return first, payload, later

    first, payload, later = aio(body())
    assert payload == rid and later > first
    events = aio(store.list_run_events(rid, after_id=first))
    assert [(e["id"], e["state"]) for e in events] == [(later, "succeeded")]
    assert aio(store.list_run_events(rid))[1]["data"] == {"worker": "w1"}
