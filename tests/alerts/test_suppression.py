"""Suppression exactly as the second seed says (docs/alerts.md "Suppression"): 1,000 failures of one workflow and
error code through a ManualClock, on the real store, enqueue exactly: the first alert, one update every N with
the count, one escalation to the escalation channel at p1 when the window ends still failing, updates there
after, and resolved to both channels on the success; never one message per failure."""

from __future__ import annotations

from datetime import UTC, timedelta

from anthares44.automation.runtime.alerts import ledger
from anthares44.automation.runtime.alerts import suppression as sm
from tests.runtime.pg import query

P = "pj_alerts"
POLICY = sm.Policy(channel="squad-billing", escalate_to="oncall", severity="p2", window_s=600, update_every=100)
CTX = {"title": "wf_invoice_settle run failed: E_UPSTREAM_503", "workflow": "wf_invoice_settle",
       "error_code": "E_UPSTREAM_503", "next_action": "a44 automation replay run_x --from-step settle"}


def _drive(store, clock, aio, failures: int):
    start = clock.now()
    for i in range(failures):
        aio(ledger.record(store, project=P, rule="builtin:run_failed", group_key="wf_invoice_settle/E_UPSTREAM_503",
                          policy=POLICY, context={**CTX, "run_id": f"run_{i:04d}", "runs_seen": [f"run_{i:04d}"]},
                          now=clock.now()))
        clock.advance(1)
    return start


def test_a_thousand_failures_send_thirteen_messages(store, clock, aio, pg_url):
    _drive(store, clock, aio, 1000)
    [alert] = [dict(a) for a in aio(store.fetch("alerts_firing_all"))]
    aio(ledger.settle(store, alert, POLICY, clock.now(), cleared=True, context={"resolved_by": "run_ok"}))

    rows = query(pg_url, "select kind, channel, severity, payload->>'count', idempotency_key, alert_id "
                         "from automation.notifications order by id")
    aid = alert["alert_id"]
    expected = [("firing", "squad-billing", "p2", 1, 1)]
    expected += [("update", "squad-billing", "p2", c, 2 + k) for k, c in enumerate(range(101, 602, 100))]
    expected += [("escalation", "oncall", "p1", 601, 8)]
    expected += [("update", "oncall", "p1", c, 9 + k) for k, c in enumerate((701, 801, 901))]
    expected += [("resolved", "squad-billing", "p2", 1000, 12), ("resolved", "oncall", "p1", 1000, 12)]
    assert [(r[0], r[1], r[2], int(r[3]), r[4]) for r in rows] == [
        (kind, ch, sev, n, f"{aid}/{seq}/{kind}/{ch}") for kind, ch, sev, n, seq in expected]
    assert {r[5] for r in rows} == {aid}

    history = query(pg_url, "select kind, count, channels from automation.alert_history order by id")
    assert [h[0] for h in history] == ["firing"] + ["update"] * 6 + ["escalation"] + ["update"] * 3 + ["resolved"]
    assert history[-1][2] == ["squad-billing", "oncall"]
    [(state, runs)] = query(pg_url, "select state, context->'runs_seen' from automation.alerts")
    assert state == "resolved" and len(__import__("json").loads(runs)) == ledger.LISTED


def test_escalation_comes_from_time_alone(store, clock, aio, pg_url):
    """Two failures, then nothing for the window: the tick escalates (suppression is not silence)."""
    _drive(store, clock, aio, 2)
    [alert] = [dict(a) for a in aio(store.fetch("alerts_firing_all"))]
    assert aio(ledger.settle(store, alert, POLICY, clock.now(), cleared=False)) == []
    clock.advance(timedelta(minutes=10))
    [msg] = aio(ledger.settle(store, alert, POLICY, clock.now(), cleared=False))
    assert (msg.kind, msg.channel, msg.severity, msg.count) == ("escalation", "oncall", "p1", 2)
    assert aio(ledger.settle(store, alert, POLICY, clock.now(), cleared=False)) == []   # once


def test_the_same_decision_twice_is_one_row(store, clock, aio, pg_url):
    """A message enqueued again under its key (a retry after a crash) is a no-op."""
    _drive(store, clock, aio, 1)
    [(key, alert_id)] = query(pg_url, "select idempotency_key, alert_id from automation.notifications")
    again = aio(store.fetchval("notification_enqueue", project=P, channel="squad-billing", key=key,
                               alert_id=alert_id, kind="firing", severity="p2", payload="{}", now=clock.now()))
    assert again is None
    assert query(pg_url, "select count(*) from automation.notifications")[0][0] == 1


def test_an_event_counted_once_however_often_it_is_read(store, clock, aio, pg_url):
    for _ in range(3):
        aio(ledger.record(store, project=P, rule="builtin:run_failed", group_key="wf/E", policy=POLICY,
                          context=CTX, now=clock.now(), event_id=42))
    assert query(pg_url, "select machine->>'count' from automation.alerts") == [("1",)]


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st


@given(st.lists(st.tuples(st.floats(0, 120), st.integers(1, 50)), min_size=1, max_size=200),
       st.integers(1, 40), st.floats(1, 3000))
def test_never_one_message_per_failure_and_never_silent(gaps, every, window):
    """Any sequence of occurrences: at most one firing, one escalation, one update per `every` occurrences;
    an escalation exactly when the window ended before the clear."""
    policy = sm.Policy("ch", "esc", "p3", window, every)
    from datetime import datetime
    now = datetime(2026, 7, 19, tzinfo=UTC)
    state, msgs = sm.open_alert(policy, now, gaps[0][1])
    for gap, n in gaps[1:]:
        now += timedelta(seconds=gap)
        state, more = sm.occur(state, policy, now, n)
        msgs += more
    state, more = sm.clear(state, policy, now)
    msgs += more
    kinds = [m.kind for m in msgs]
    assert kinds.count("firing") == 1 and kinds[0] == "firing"
    assert kinds.count("update") <= (state.count - gaps[0][1]) // every
    assert kinds.count("escalation") == (1 if now >= sm.State.from_json(state.to_json()).window_ends_at(policy)
                                         else 0)
    assert [m.seq for m in msgs] == sorted(m.seq for m in msgs) and msgs[-1].kind == "resolved"
    assert len({m.key("al_x") for m in msgs}) == len(msgs)
