"""The delivery worker's durability on a ManualClock: backoff with jitter within its bounds, the attempt budget,
permanent refusals, the lease that brings back a row whose sender died mid-send, the fencing of a stale attempt,
claims shared by two deliverers without doubles, and the loud end of a failed notification (/metrics)."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

from prometheus_client.parser import text_string_to_metric_families

from anthares44.automation.app import metrics as app_metrics
from anthares44.automation.http.metrics import render_metrics
from anthares44.automation.runtime.notify import outbox
from anthares44.automation.runtime.notify.delivery import Deliverer, DeliverySettings, DeliveryWorker
from anthares44.automation.runtime.notify.messages import Notification
from tests.notify.conftest import FAST, PROJECT, add_channel, enqueue, row
from tests.notify.receivers import HttpReceiver


def test_backoff_doubles_with_jitter_and_is_capped():
    s = DeliverySettings(retry_base=timedelta(seconds=5), retry_max=timedelta(minutes=15))
    rng = random.Random(1)
    for attempt, full in ((1, 5), (2, 10), (3, 20), (9, 900), (40, 900)):
        for _ in range(50):
            wait = s.backoff(attempt, rng).total_seconds()
            assert full / 2 <= wait <= full
    assert s.backoff(1, rng, retry_after=120).total_seconds() == 120      # a receiver's Retry-After is honoured
    assert s.backoff(1, rng, retry_after=10 ** 6).total_seconds() <= 900  # within the cap


def test_5xx_and_429_are_retried_with_backoff_then_delivered(store, aio, clock, deliverer):
    flaky = HttpReceiver(script=[503, 429, 200])
    try:
        add_channel(store, aio, "flaky", "slack", {"url": flaky.hook})
        nid = enqueue(store, aio, "flaky", "k-flaky")
        waits = []
        for attempt in (1, 2):
            start = clock.now()
            assert aio(deliverer.deliver_due()) == 1
            r = row(store, aio, nid)
            assert r["state"] == "pending" and r["attempts"] == attempt and "E_NOTIFY_UNAVAILABLE" in r["last_error"]
            waits.append((r["next_attempt_at"] - start).total_seconds())
            assert aio(deliverer.deliver_due()) == 0       # not due before its backoff
            clock.advance(r["next_attempt_at"] - clock.now())
        assert 1 <= waits[0] <= 2 and 2 <= waits[1] <= 4    # base 2 s, doubled, jitter half to all of it
        assert aio(deliverer.deliver_due()) == 1
        r = row(store, aio, nid)
        assert r["state"] == "delivered" and r["attempts"] == 3 and r["last_error"] is None
        assert flaky.keys() == ["k-flaky"] * 3              # every attempt carried the same key
    finally:
        flaky.close()


def test_after_the_budget_it_fails_loudly_and_metrics_count_it(store, aio, clock, deliverer, caplog):
    down = HttpReceiver(script=[500] * 10)
    try:
        add_channel(store, aio, "down", "slack", {"url": down.hook})
        nid = enqueue(store, aio, "down", "k-down")
        with caplog.at_level("WARNING", logger="a44.notify"):
            for _ in range(FAST.max_attempts):
                assert aio(deliverer.deliver_due()) == 1
                clock.advance(timedelta(minutes=5))
        assert aio(deliverer.deliver_due()) == 0
        r = row(store, aio, nid)
        assert r["state"] == "failed" and r["attempts"] == FAST.max_attempts and "HTTP 500" in r["last_error"]
        [line] = [rec.getMessage() for rec in caplog.records if rec.levelname == "WARNING"]
        assert "channel down" in line and "FAILED after 4 attempt(s)" in line
        assert f"a44 monitor notifications retry {nid}" in line
        text = render_metrics(aio(app_metrics.collect(store))).decode()
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        [sample] = fams["automation_notifications_failed"].samples
        assert sample.name == "automation_notifications_failed_total" and sample.value == 1
        assert sample.labels == {"project": "pj_default", "channel": "down"}
    finally:
        down.close()


def test_a_4xx_is_permanent_but_408_is_retried(store, aio, deliverer):
    picky = HttpReceiver(script=[408, 404])
    try:
        add_channel(store, aio, "picky", "slack", {"url": picky.hook})
        a = enqueue(store, aio, "picky", "k-408")
        aio(deliverer.deliver_due())
        assert row(store, aio, a)["state"] == "pending"
        b = enqueue(store, aio, "picky", "k-404", alert_id="alr_2")     # another alert's: it need not wait
        aio(deliverer.deliver_due())
        r = row(store, aio, b)
        assert r["state"] == "failed" and r["attempts"] == 1 and "HTTP 404" in r["last_error"]
    finally:
        picky.close()


def test_a_sender_that_died_mid_send_is_retried_after_its_lease_and_a_stale_attempt_changes_nothing(
        store, aio, clock, receiver, deliverer):
    add_channel(store, aio, "squad-billing", "webhook", {"url": receiver.hook, "secretRef": "sec_hook"})
    nid = enqueue(store, aio, "squad-billing", "k-lease")
    [claimed] = aio(deliverer.claim())         # a daemon claims it, then dies before recording anything
    assert aio(deliverer.claim()) == []        # leased: nobody else takes it meanwhile
    clock.advance(FAST.lease + timedelta(milliseconds=1))
    assert aio(deliverer.deliver_due()) == 1   # the lease ended: sent again, with the same key
    r = row(store, aio, nid)
    assert r["state"] == "delivered" and r["attempts"] == 2
    # the first claimer comes back and records its attempt: fenced by the attempt number, nothing changes
    from anthares44.automation.runtime.notify.outcome import Outcome
    assert aio(deliverer.record(Notification.of(claimed), Outcome.refused("late"))) == "taken"
    assert row(store, aio, nid)["state"] == "delivered"
    assert receiver.keys() == ["k-lease"]


def test_two_deliverers_share_the_outbox_without_sending_one_twice(store, aio, secrets):
    slow = HttpReceiver(delay=0.05)
    d1, d2 = (Deliverer(store, secrets, FAST) for _ in range(2))
    try:
        add_channel(store, aio, "shared", "slack", {"url": slow.hook})
        ids = [enqueue(store, aio, "shared", f"k{i}") for i in range(40)]

        async def drain(d):
            while await d.deliver_due(limit=4):
                pass
        async def both():
            await asyncio.gather(drain(d1), drain(d2))
        aio(both())
        assert sorted(slow.keys()) == sorted(f"k{i}" for i in range(40))
        assert {row(store, aio, i)["state"] for i in ids} == {"delivered"}
    finally:
        aio(d1.close())
        aio(d2.close())
        slow.close()


def test_a_missing_secret_or_channel_is_retried_not_lost(store, aio, clock, receiver, deliverer):
    add_channel(store, aio, "hook2", "webhook", {"url": receiver.hook, "secretRef": "sec_not_yet"})
    a = enqueue(store, aio, "hook2", "k-secret")
    b = enqueue(store, aio, "nowhere", "k-channel")
    aio(deliverer.deliver_due())
    ra, rb = row(store, aio, a), row(store, aio, b)
    assert ra["state"] == rb["state"] == "pending"
    assert ra["last_error"].startswith("E_SECRET_NOT_FOUND") and "does not exist" in rb["last_error"]
    assert receiver.requests == []


def test_an_alerts_messages_arrive_in_order_after_the_receiver_recovers(store, aio, clock, deliverer, caplog):
    """A firing refused with 503 waits out its backoff; the alert's update enqueued meanwhile is due at once but
    waits behind it, so the receiver gets firing then update (never the update first); another alert's message
    does not wait."""
    hook = HttpReceiver(script=[503, 200, 503])
    try:
        add_channel(store, aio, "hook", "slack", {"url": hook.hook})
        first = enqueue(store, aio, "hook", "al_1/1/firing/hook", kind="firing")
        assert aio(deliverer.deliver_due()) == 1                     # 503: retried later
        update = enqueue(store, aio, "hook", "al_1/2/update/hook", kind="update")
        other = enqueue(store, aio, "hook", "al_2/1/firing/hook", alert_id="alr_2")
        assert aio(deliverer.deliver_due()) == 1                     # the other alert's message only
        assert row(store, aio, update)["attempts"] == 0 and row(store, aio, other)["state"] == "delivered"
        assert aio(store.fetchval("notify_next_due")) == row(store, aio, first)["next_attempt_at"]
        for _ in range(2):                                           # 503 again, then 200
            clock.advance(row(store, aio, first)["next_attempt_at"] - clock.now())
            assert aio(deliverer.deliver_due()) == 1
        assert row(store, aio, first)["state"] == "delivered" and row(store, aio, update)["state"] == "pending"
        assert aio(deliverer.deliver_due()) == 1
        assert hook.keys() == ["al_1/1/firing/hook", "al_2/1/firing/hook", "al_1/1/firing/hook",
                               "al_1/1/firing/hook", "al_1/2/update/hook"]
    finally:
        hook.close()


def test_the_delivery_loop_sends_a_retry_when_its_clock_reaches_the_backoff(store, aio, clock, secrets):
    """The worker daemons run sleeps until the clock reaches the next due attempt (issue 27: one clock): with an
    hour's backoff and an hour's poll of wall time, only the clock's alarm can bring the second attempt."""
    flaky = HttpReceiver(script=[503, 200])
    hour = DeliverySettings(retry_base=timedelta(hours=1), retry_max=timedelta(hours=1), max_attempts=4,
                            timeout=timedelta(seconds=2))
    worker = DeliveryWorker(Deliverer(store, secrets, hour, rng=random.Random(7)), poll=timedelta(hours=1))

    async def scenario(nid):
        async def failed_once():
            r = await outbox.get(store, PROJECT, nid)
            return r["attempts"] == 1 and r["last_error"] is not None and r["state"] == "pending"

        stop = asyncio.Event()
        task = asyncio.create_task(worker.serve(stop))
        try:
            for _ in range(1500):
                if await failed_once():
                    break
                await asyncio.sleep(0.02)
            due = (await outbox.get(store, PROJECT, nid))["next_attempt_at"]
            assert due - clock.now() >= timedelta(minutes=30)      # the backoff: half to all of an hour
            clock.advance(due - clock.now())
            for _ in range(1500):
                if (await outbox.get(store, PROJECT, nid))["state"] == "delivered":
                    break
                await asyncio.sleep(0.02)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)

    try:
        add_channel(store, aio, "flaky", "slack", {"url": flaky.hook})
        nid = enqueue(store, aio, "flaky", "k-later")
        aio(scenario(nid))
        r = row(store, aio, nid)
        assert r["state"] == "delivered" and r["attempts"] == 2 and flaky.keys() == ["k-later"] * 2
    finally:
        flaky.close()
