"""The test kit drives the real engine on virtual time: retries at their backoff instants, a schedule across a
DST change, a run waiting on a person reported as such, mocks recording what the engine sent."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from anthares44.automation.compiler.ir import RetryIR
from anthares44.automation.compiler.retry_policy import Failure, retry_delay_ms
from anthares44.automation.testkit import Fail, Ok
from tests.runtime.pg import query

CHARGE = """
name: charge-order
version: 1
steps:
  - id: charge
    uses: connector/payments.charge
    timeout: 10s
    retry: {max: 5, strategy: exponential-jitter, base: 2s, cap: 5m}
    with: {amount: "{{ input.amount }}"}
  - id: record
    uses: sql/execute
    timeout: 5s
    query: "select $1::int as amount"
    params: ["{{ input.amount }}"]
"""


def test_five_failures_then_ok_each_attempt_at_the_instant_its_backoff_predicts(a44_env):
    env = a44_env
    charge = env.mock("connector/payments.charge", *[Fail("E_UPSTREAM_503")] * 5, Ok({"charge": "ch_1"}))
    env.publish(CHARGE)
    # the policy's own arithmetic on a copy of the worker's jitter RNG: where each attempt must start
    rng = random.Random()
    rng.setstate(env.workers[0].rng.getstate())
    retry = RetryIR.model_validate(env.call(env.store.latest_version("pj_default", "wf_charge_order"))["ir"]
                                   ["nodes"][0]["retry"])
    started = env.now
    predicted = [started]
    for n in range(1, 6):
        predicted.append(predicted[-1] + timedelta(milliseconds=retry_delay_ms(
            retry, n, Failure("E_UPSTREAM_503", "", True), rng)))

    run = env.run("charge-order", {"amount": 12}, idempotency_key="order-1")
    assert run.state == "waiting"          # the first failure is recorded, the retry is due later
    idle = env.run_until_idle()

    assert idle.reason == "idle", str(idle)
    assert run.state == "succeeded"
    charges = run.attempts("charge")
    assert [(a["attempt"], a["status"]) for a in charges] == [(i, "failed") for i in range(1, 6)] + [(6, "succeeded")]
    assert [a["started_at"] for a in charges] == predicted
    assert run.attempts("record")[0]["result"]["rows"] == [{"amount": 12}]     # sql/execute ran for real
    assert [(c.attempt, c.params, c.idempotency_key) for c in charge.calls] == \
        [(i, {"amount": 12}, f"{run.id}:charge") for i in range(1, 7)]
    assert idle.now == predicted[-1]       # nothing was due after the last attempt: the clock stopped there


def test_an_unmocked_network_connector_fails_closed(a44_env):
    env = a44_env
    env.publish("""
name: notify
version: 1
steps:
  - id: call
    uses: http
    timeout: 5s
    retry: {max: 3}
    method: POST
    url: https://hooks.example.com/notify
""")
    run = env.run("notify", {})
    assert run.state == "failed"
    assert [(a["status"], a["error_code"]) for a in run.attempts("call")] == [("failed", "E_UNMOCKED_CONNECTOR")]


def test_the_socket_guard_blocks_outbound_connections_but_not_the_database(a44_env):
    import socket

    from anthares44.automation.testkit.guard import OutboundBlocked

    with socket.socket() as s, pytest.raises(OutboundBlocked, match="203.0.113.9:443"):
        s.connect(("203.0.113.9", 443))
    assert a44_env.call(a44_env.store.fetchval("server_version")) > 0


DAILY = """
name: nightly
version: 1
steps:
  - id: sync
    uses: connector/ledger.sync
    timeout: 30s
    retry: {max: 5, strategy: exponential-jitter, base: 2s, cap: 5m}
"""
NIGHTLY = """
- id: trg_nightly
  type: schedule
  cron: "30 2 * * *"
  tz: Europe/Berlin
  workflow: wf_nightly
  dstPolicy: skip-nonexistent
"""


@pytest.mark.a44_env(start="2027-03-25T12:00:00Z")
def test_a_daily_schedule_across_the_spring_dst_change_fires_and_retries_at_the_predicted_instants(a44_env):
    env = a44_env
    sync = env.mock("connector/ledger.sync", *[Fail("E_UPSTREAM_503")] * 5, Ok({"synced": True}))
    env.publish(DAILY, NIGHTLY)
    rng = random.Random()
    rng.setstate(env.workers[0].rng.getstate())
    retry = RetryIR(max=5, strategy="exponential-jitter", base_ms=2_000, cap_ms=300_000)

    env.advance("5d")

    # 02:30 Berlin: 01:30Z in CET; on 28 March 2027 clocks jump 02:00 -> 03:00 (no 02:30: skipped); then 00:30Z
    firings = [datetime(2027, 3, 26, 1, 30, tzinfo=UTC), datetime(2027, 3, 27, 1, 30, tzinfo=UTC),
               datetime(2027, 3, 29, 0, 30, tzinfo=UTC), datetime(2027, 3, 30, 0, 30, tzinfo=UTC)]
    runs = env.runs("nightly")
    assert [r.row["created_at"] for r in runs] == firings
    for run, fired in zip(runs, firings):       # each run fails five times, then succeeds, on its backoff
        predicted = [fired]
        for n in range(1, 6):
            predicted.append(predicted[-1] + timedelta(milliseconds=retry_delay_ms(
                retry, n, Failure("E_UPSTREAM_503", "", True), rng)))
        assert [a["started_at"] for a in run.attempts("sync")] == predicted
        assert run.state == "succeeded"
    assert len(sync.calls) == 4 * 6


EXCLUSIVE = """
name: wire
version: 1
steps:
  - id: send
    uses: connector/bank.wire
    timeout: 10s
    exclusive: true
"""


def test_run_until_idle_stops_and_says_what_a_run_waits_on(a44_env):
    env = a44_env
    env.mock("connector/bank.wire", Ok({"wire": "w_1"}))
    env.publish(EXCLUSIVE)
    env.kill_worker(at="after_effect_before_record", step="send")
    run = env.run("wire", {})
    idle = env.run_until_idle(max_virtual="1d")
    assert run.state == "awaiting_confirmation"
    assert idle.reason == "waiting"
    assert [(w.run_id, w.state, w.step) for w in idle.waiting] == [(run.id, "awaiting_confirmation", "send")]
    assert "runs resolve" in str(idle)
    # the lease of the dead worker expired on virtual time (30 s) before another worker parked the run
    assert idle.now == run.attempts("send")[0]["started_at"] + timedelta(seconds=30)


PAY = """
name: pay
version: 1
steps:
  - id: charge
    uses: connector/payments.charge
    timeout: 10s
    retry: {max: 3}
    with: {amount: "{{ input.amount }}"}
  - id: receipt
    uses: pass
    timeout: 1s
"""


def test_100_runs_whose_worker_dies_after_the_payment_and_before_its_record_all_complete_charged_once_per_key(
        a44_env):
    env = a44_env
    charge = env.mock("connector/payments.charge", Ok({"status": "captured"}))
    env.publish(PAY)
    env.start_worker()           # two daemons on one clock
    env.kill_worker(at="after_effect_before_record", step="charge", times=50)
    runs = [env.run("pay", {"amount": i}, idempotency_key=f"order-{i}", settle=False) for i in range(100)]

    idle = env.run_until_idle(max_virtual="1h")

    assert idle.reason == "idle", str(idle)
    assert Counter(r.state for r in runs) == {"succeeded": 100}
    per_run = Counter(c.run_id for c in charge.calls)
    assert set(per_run.values()) <= {1, 2}
    killed = {k.run_id for k in env.faults.kills}
    assert len(killed) == 50
    assert {r for r, n in per_run.items() if n == 2} == killed
    for r in runs:
        assert {c.idempotency_key for c in charge.calls_of(r.id)} == {f"{r.id}:charge"}
        statuses = [a["status"] for a in r.attempts("charge")]
        assert statuses == (["lease_expired", "succeeded"] if r.id in killed else ["succeeded"])
    # both daemons took runs, and the replacements of the killed ones finished theirs
    workers = {a["worker_id"] for r in runs for a in r.attempts("charge")}
    assert {w.split("~")[0] for w in workers} == {"w1", "w2"}
    assert any("~" in w for w in workers)


ORDERS = """
name: on-paid
version: 1
trigger:
  event: orders.paid
steps:
  - id: ship
    uses: connector/shipping.create
    timeout: 10s
    with: {order: "{{ input.orderId }}"}
"""


def test_an_event_delivered_twice_starts_one_run(a44_env):
    env = a44_env
    ship = env.mock("connector/shipping.create", Ok({"label": "L1"}))
    env.publish(ORDERS)
    first, second = env.deliver_twice("orders.paid", {"orderId": "o-9"}, "orders.paid:o-9")
    assert (first.created, second.created, first.event_id) == (True, False, second.event_id)
    runs = env.runs("on-paid")
    assert [r.state for r in runs] == ["succeeded"]
    assert [c.params for c in ship.calls] == [{"order": "o-9"}]


def test_runs_waiting_on_a_retry_resume_after_postgres_restarts(a44_env):
    env = a44_env
    env.mock("connector/payments.charge", Fail("E_UPSTREAM_503"), Ok({"charge": "ch_2"}))
    env.publish(CHARGE)
    env.run("charge-order", {"amount": 6})
    assert env.run_until_idle().reason == "idle"    # sql/execute ran: the pools hold connections from before
    run = env.run("charge-order", {"amount": 7})
    assert run.state == "waiting"
    began = query(env.store.url, "select pg_postmaster_start_time()")[0][0]
    env.restart_postgres()
    assert query(env.store.url, "select pg_postmaster_start_time()")[0][0] > began     # a new postmaster
    env.run_until_idle()
    assert run.state == "succeeded"
    assert [a["status"] for a in run.attempts()] == ["failed", "succeeded", "succeeded"]


NAP = """
name: nap
version: 1
steps:
  - id: before
    uses: pass
    timeout: 1s
  - id: rest
    sleep: 2d
  - id: after
    uses: pass
    timeout: 1s
"""


def test_advance_stops_where_work_is_due_and_not_before(a44_env):
    env = a44_env
    env.publish(NAP)
    start = env.now
    run = env.run("nap", {})
    assert run.state == "sleeping"
    env.advance("1d")
    assert (run.state, env.now) == ("sleeping", start + timedelta(days=1))
    env.advance("3d")
    assert run.state == "succeeded"
    assert run.attempts("after")[0]["started_at"] == start + timedelta(days=2)     # woken at the sleep's end
    assert env.now == start + timedelta(days=4)


RENEWAL = """
name: renewal
version: 1
maxDuration: 40d
steps:
  - id: charge
    uses: connector/payments.charge
    timeout: 10s
    retry: {max: 5, strategy: exponential-jitter, base: 2s, cap: 5m}
  - id: cooldown
    sleep: {for: 30d, tz: Europe/Berlin}
    needs: [charge]
  - id: notify
    uses: connector/mail.notify
    timeout: 10s
    needs: [cooldown]
"""
RENEWAL_TRIGGER = """
- id: trg_renewal
  type: schedule
  cron: "30 2 27 3 *"
  tz: Europe/Berlin
  workflow: wf_renewal
"""


@pytest.mark.a44_env(start="2027-03-20T12:00:00Z", log_hot_days=90)    # 50 days: keep the attempts hot
def test_a_schedule_a_backoff_and_a_30_day_sleep_across_dst_each_at_its_predicted_instant(a44_env):
    """Issue 27's done-when: a schedule, a step that fails five times with backoff and a 30-day sleep in a zone whose
    clocks change meanwhile run on virtual time, every event at the instant the rules predict (§11, §3.2, §19)."""
    env = a44_env
    charge = env.mock("connector/payments.charge", *[Fail("E_UPSTREAM_503")] * 5, Ok({"charge": "ch_1"}))
    notify = env.mock("connector/mail.notify", Ok({"sent": True}))
    env.publish(RENEWAL, RENEWAL_TRIGGER)
    rng = random.Random()
    rng.setstate(env.workers[0].rng.getstate())
    retry = RetryIR(max=5, strategy="exponential-jitter", base_ms=2_000, cap_ms=300_000)

    env.advance("50d")      # the schedule fires once a year: advance a window instead of running until idle

    [run] = env.runs("renewal")
    fired = datetime(2027, 3, 27, 1, 30, tzinfo=UTC)     # 02:30 in Berlin, still CET (+01:00)
    assert run.row["created_at"] == fired
    predicted = [fired]
    for n in range(1, 6):
        predicted.append(predicted[-1] + timedelta(milliseconds=retry_delay_ms(
            retry, n, Failure("E_UPSTREAM_503", "", True), rng)))
    assert [a["started_at"] for a in run.attempts("charge")] == predicted
    # 30 days of Berlin wall time from the charge's end: the clocks went forward on 28 March, so 30 d - 1 h in UTC
    charged = run.attempts("charge")[-1]["finished_at"]
    due = charged + timedelta(days=30) - timedelta(hours=1)
    [nap] = run.attempts("cooldown")
    assert nap["started_at"] == charged
    assert datetime.fromisoformat(nap["result"]["due_at"].replace("Z", "+00:00")) == due
    assert nap["result"]["late_ms"] == 0 and nap["finished_at"] == due
    assert [a["started_at"] for a in run.attempts("notify")] == [due]
    assert run.state == "succeeded" and len(charge.calls) == 6 and len(notify.calls) == 1


def test_advance_and_run_until_idle_raise_instead_of_spinning_on_work_no_round_takes(a44_env):
    """If the store calls something due at an instant that no round of the kit takes (a bug of the engine or the
    kit), advance and run_until_idle say where they are stuck instead of looping forever."""
    env = a44_env
    stuck_at = env.now - timedelta(seconds=1)

    async def always_due():
        return stuck_at

    env._next_due = always_due          # the injected bug: due work that nothing consumes
    env.STALL_ROUNDS = 5
    with pytest.raises(RuntimeError, match="the kit is stuck at"):
        env.advance("1m")
    with pytest.raises(RuntimeError, match="the kit is stuck at"):
        env.run_until_idle()
