"""The dead-letter queue (§10.3, §10.4): the three causes, byte-identical envelopes, redrive rate/max/once, filter
diagnostics, bad input that changes nothing, and a redriven message that fails again returning with its history."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from anthares44.automation.compiler.ir import seal, to_json
from anthares44.automation.compiler.models.queues import Queue
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime import queues as rq
from tests.runtime.engine_support import PROJECT, Script, engine, node, workflow


def _publish(store, aio, *, queue: Queue, plan_steps=("s1",)):
    aio(rq.store_queues(store, PROJECT, [queue]))
    ir = workflow([node(s) for s in plan_steps], name="dl")
    ir = seal(ir.model_copy(update={"queue": queue.id}))
    aio(store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir)))
    return ir


def _count(store, aio, table="dead_letters"):
    async def go():
        async with store.connection("t") as c:
            return await c.fetchval(f"select count(*) from automation.{table}")
    return aio(go())


def test_exhausted_max_attempts_goes_to_dlq_with_history_and_exact_envelope(store, aio, clock):
    ir = _publish(store, aio, queue=Queue(id="q_dl", maxAttempts=2))
    raw = b'{"id":"evt_1",  "type":"t", "idempotency_key":"k-1", "partition_key":null,\n "occurred_at":"2026-07-19T14:02:11.884Z","attempt":1,"data":{"n":1}}'
    out = aio(rq.deliver_envelope(store, PROJECT, ir.workflow_id, raw))
    assert out["outcome"] == "created"
    script = Script(plan={"s1": ["retry", "retry"]})     # 503 with no retry budget left: worth delivering again
    aio(engine(store, script, clock=clock).drive())
    assert script.called("s1") == 2                       # two deliveries (maxAttempts), one attempt each
    rows = aio(store.fetch("dlq_list", project=PROJECT, queue=None, limit=10))
    assert len(rows) == 1
    dl = aio(rq.dlq_show(store, PROJECT, rows[0]["dead_letter_id"], with_attempts=True))
    assert dl["error_code"] == "E_UPSTREAM_503" and dl["last_error"]["step"] == "s1" and dl["attempts"] == 2
    assert [d["delivery"] for d in dl["history"]] == [1, 2]
    assert all(d["attempts"][0]["status"] == "failed" for d in dl["history"])
    # the envelope is not kept by deliver_envelope's run (no event row): the synthesized one is used; for the
    # byte-identical round trip see test_invalid_envelope_kept_byte_for_byte and the redrive test below
    assert rq.envelope_bytes(dl) == raw             # byte for byte


def test_a_permanent_error_goes_to_the_dlq_at_once(store, aio, clock):
    """The manual: a permanent error (a 4xx) is not delivered again up to maxAttempts: the same message would
    fail the same way. It is a dead letter after its first delivery."""
    ir = _publish(store, aio, queue=Queue(id="q_dl", maxAttempts=5))
    raw = (b'{"id":"evt_2","type":"t","idempotency_key":"k-2","partition_key":null,'
           b'"occurred_at":"2026-07-19T14:02:11.884Z","attempt":1,"data":{"n":2}}')
    assert aio(rq.deliver_envelope(store, PROJECT, ir.workflow_id, raw))["outcome"] == "created"
    script = Script(plan={"s1": ["perm"]})
    aio(engine(store, script, clock=clock).drive())
    assert script.called("s1") == 1
    (row,) = aio(store.fetch("dlq_list", project=PROJECT, queue=None, limit=10))
    dl = aio(rq.dlq_show(store, PROJECT, row["dead_letter_id"]))
    assert (dl["error_code"], dl["attempts"]) == ("E_UPSTREAM_400", 1)


def test_invalid_envelope_kept_byte_for_byte(store, aio, clock):
    ir = _publish(store, aio, queue=Queue(id="q_dl"))
    for raw in (b'{"id": "evt_2", "type": broken', b'\xff\xfe{not utf8}\x00', b'{"id":"x"}'):
        out = aio(rq.deliver_envelope(store, PROJECT, ir.workflow_id, raw))
        assert out["outcome"] == "dead_lettered" and out["error_code"] == "E_ENVELOPE_INVALID"
        dl = aio(rq.dlq_show(store, PROJECT, out["dead_letter_id"]))
        assert rq.envelope_bytes(dl) == raw
    stats = aio(rq.dlq_stats(store, PROJECT, "q_dl", since="24h"))
    assert stats["by_error_code"][0]["error_code"] == "E_ENVELOPE_INVALID" and stats["total"] == 3


def test_a_redrive_of_envelopes_that_still_do_not_parse_ends(store, aio, clock):
    """An entry whose envelope still does not deserialize goes back to the DLQ as a new entry, later in the
    redrive's own scan; the redrive must not take that one up again (it did, forever: a REST `redrive {}` hung
    and filled the DLQ). The next redrive takes the new entries, once each."""
    ir = _publish(store, aio, queue=Queue(id="q_dl"))
    for raw in (b'{"id": "evt_2", "type": broken', b'{"id":"x"}'):
        assert aio(rq.deliver_envelope(store, PROJECT, ir.workflow_id, raw))["outcome"] == "dead_lettered"
    rep = aio(rq.dlq_redrive(store, PROJECT, "q_dl"))
    assert (rep.scanned, rep.matched, rep.dead_lettered_again, rep.redriven) == (2, 2, 2, 0)
    assert _count(store, aio) == 4                        # the two originals, marked redriven, and their successors
    again = aio(rq.dlq_redrive(store, PROJECT, "q_dl"))
    assert (again.scanned, again.dead_lettered_again) == (2, 2)
    assert {r["dead_letter_id"] for r in again.runs} == {r["dead_letter_again"] for r in rep.runs}
    assert _count(store, aio) == 6


def test_max_age_in_queue_goes_to_dlq(store, aio, clock):
    ir = _publish(store, aio, queue=Queue(id="q_old", deadLetter={"maxAge": "1s"}))
    run = aio(store.create_run(PROJECT, ir.workflow_id, {"x": 1}, "old-1", queue="q_old"))
    clock.advance(timedelta(seconds=2))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.expire_queued()) == 1
    assert aio(store.get_run(run.run_id))["state"] == "cancelled"
    rows = aio(store.fetch("dlq_list", project=PROJECT, queue=None, limit=10))
    assert [r["error_code"] for r in rows] == ["E_EVENT_TOO_OLD"]
    assert aio(eng.drive()) == {}                          # nothing left to run


def test_redrive_rate_max_once_and_failing_again(store, aio, clock):
    ir = _publish(store, aio, queue=Queue(id="q_dl", maxAttempts=1))
    raws = []
    for i in range(8):
        raw = f'{{"id":"evt_{i}", "type":"t","idempotency_key":"m-{i}",  "occurred_at":"2026-07-19T14:02:11Z","attempt":1,"data":{{"i":{i}}}}}'.encode()
        raws.append(raw)
        # an envelope whose first delivery was refused: E_ENVELOPE_INVALID entries cannot be redriven to a run;
        # put valid envelopes in the DLQ as a failing run would
        assert aio(rq.deliver_envelope(store, PROJECT, ir.workflow_id, raw))["outcome"] == "created"
    script = Script(plan={"s1": ["retry"] * 16})     # 503, no step retries: each run fails -> DLQ (maxAttempts 1)
    aio(engine(store, script, clock=clock).drive())
    assert _count(store, aio) == 8
    before = _count(store, aio, "runs")
    # bad input: clear errors, nothing changed
    with pytest.raises(A44Error) as e:
        aio(rq.dlq_redrive(store, PROJECT, "q_dl", filter="error_code == "))
    assert e.value.code == "E_DLQ_FILTER" and e.value.details["diagnostics"][0]["column"] >= 1
    with pytest.raises(A44Error) as e:
        aio(rq.dlq_redrive(store, PROJECT, "q_dl", filter="nope == 1"))
    assert e.value.code == "E_DLQ_FILTER" and e.value.details["diagnostics"][0]["column"] == 1
    for bad in ("-5/s", "0/s", "fast"):
        with pytest.raises(A44Error) as e:
            aio(rq.dlq_redrive(store, PROJECT, "q_dl", rate=bad))
        assert e.value.code == "E_INVALID_ARGUMENT"
    with pytest.raises(A44Error) as e:
        aio(rq.dlq_redrive(store, PROJECT, "q_nope"))
    assert e.value.code == "E_QUEUE_NOT_FOUND"
    assert _count(store, aio, "runs") == before
    dry = aio(rq.dlq_redrive(store, PROJECT, "q_dl", filter="error_code == 'E_UPSTREAM_503'", dry_run=True))
    assert dry.matched == 8 and dry.redriven == 0 and _count(store, aio, "runs") == before
    # rate and max, measured
    t0 = time.monotonic()
    rep = aio(rq.dlq_redrive(store, PROJECT, "q_dl", filter="error_code == 'E_UPSTREAM_503' && data.i >= 0",
                             rate="20/s", max=5))
    took = time.monotonic() - t0
    assert rep.redriven == 5 and took >= 4 / 20 * 0.95, took
    assert (rep.redriven - 1) / took <= 20 * 1.1     # the first goes at once, then one per 1/rate
    # run again: only the 3 not redriven yet, never the same entry twice
    rep2 = aio(rq.dlq_redrive(store, PROJECT, "q_dl", max=100))
    assert rep2.redriven == 3
    assert {r["dead_letter_id"] for r in rep.runs}.isdisjoint({r["dead_letter_id"] for r in rep2.runs})
    assert aio(rq.dlq_redrive(store, PROJECT, "q_dl")).redriven == 0
    # the redriven messages fail again: back in the DLQ, with the earlier history and the exact envelope
    aio(engine(store, script, clock=clock).drive())
    rows = aio(store.fetch("dlq_list", project=PROJECT, queue=None, limit=100))
    again = [r for r in rows if r["redriven_at"] is None] if "redriven_at" in rows[0] else None
    async def waiting():
        async with store.connection("t") as c:
            return await c.fetch("select dead_letter_id from automation.dead_letters where redriven_at is null")
    fresh = aio(waiting())
    assert len(fresh) == 8
    dl = aio(rq.dlq_show(store, PROJECT, fresh[0]["dead_letter_id"], with_attempts=True))
    assert dl["redrive_of"] is not None and len(dl["history"]) == 2
    assert rq.envelope_bytes(dl) in raws        # byte for byte after the round trip through a run and a redrive
    stats = aio(rq.queue_stats(store, PROJECT))
    q = next(s for s in stats if s["queue"] == "q_dl")
    assert q["dlq_depth"] == 8 and q["ordering"] == "none"
    del again


def _publish_compensating(store, aio, queue: Queue):
    """s0 (compensated by `undo`) -> s1: a failure of s1 compensates s0 before the run fails."""
    aio(rq.store_queues(store, PROJECT, [queue]))
    ir = workflow([node("s0", compensate="script"), node("s1")], name="dlsaga")
    ir = seal(ir.model_copy(update={"queue": queue.id}))
    aio(store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir)))
    return ir


@pytest.mark.parametrize("outcome, deliveries", [("perm", 1), ("retry", 3)])
def test_a_compensated_failure_follows_max_attempts_like_any_failure(store, aio, clock, outcome, deliveries):
    """A run that compensated before failing is a failed run for its queue: a transient error is delivered again
    up to maxAttempts, a permanent one is a dead letter after its first delivery, as without compensation."""
    ir = _publish_compensating(store, aio, Queue(id="q_saga", maxAttempts=3))
    raw = (b'{"id":"evt_s","type":"t","idempotency_key":"k-s","partition_key":null,'
           b'"occurred_at":"2026-07-19T14:02:11.884Z","attempt":1,"data":{"n":3}}')
    assert aio(rq.deliver_envelope(store, PROJECT, ir.workflow_id, raw))["outcome"] == "created"
    script = Script(plan={"s1": [outcome] * 3})
    eng = engine(store, script, clock=clock)
    for _ in range(6):          # compensation waits are durable: step the clock past each
        aio(eng.drive())
        clock.advance(timedelta(minutes=2))
    assert script.called("s1") == deliveries
    assert sum(1 for c in script.calls if c[1] == "compensation") == deliveries
    (row,) = aio(store.fetch("dlq_list", project=PROJECT, queue=None, limit=10))
    dl = aio(rq.dlq_show(store, PROJECT, row["dead_letter_id"]))
    assert dl["attempts"] == deliveries
