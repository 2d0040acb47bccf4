"""The kit drives the daemon's other loops at their virtual instants (testkit/housekeeping.py): an alert rule with a
window fires at the first evaluator round that sees the failures and resolves when they leave its window; a
notification whose channel fails is retried at its backoff's instants; log retention archives and deletes at
the first hourly round past the hot retention."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta

from anthares44.automation.grammar.alert_rules import check_rule
from anthares44.automation.runtime.alerts import rules as rule_store
from anthares44.automation.runtime.notify.delivery import DeliverySettings
from anthares44.automation.testkit import Fail, Ok

FLAKY = """
name: flaky
version: 1
steps:
  - id: charge
    uses: connector/payments.charge
    timeout: 10s
"""
INTERVAL = timedelta(seconds=15)          # the evaluator's interval (serve's default)
TOLERANCE = INTERVAL / 2                  # evaluator.evaluate_rule: half an interval of sampling jitter


def _grid_after(anchor: datetime, t: datetime, step: timedelta) -> datetime:
    """The first anchor + k*step strictly after t."""
    return anchor + step * (math.floor((t - anchor) / step) + 1)


def _alerts(env) -> list[dict]:
    rows = env.call(env.store.pool.fetch(
        "select rule, state, opened_at, resolved_at from automation.alerts where rule = 'failures' order by opened_at"))
    return [dict(r) for r in rows]


def _rule_and_channel(env) -> None:
    env.call(env.store.fetchval("alert_channel_upsert", project=env.project, name="oncall", kind="webhook",
                                config=json.dumps({"url": "http://127.0.0.1:9/h", "secretRef": "sec_hook"}),
                                now=env.now))
    rule = check_rule(name="failures", metric="automation.runs", filter='state="failed"',
                      condition="increase(10m) > 0", notify="oncall", suppress_window="1h")
    env.call(rule_store.upsert(env.store, env.project, rule))


def test_a_windowed_rule_fires_at_the_predicted_round_and_resolves_when_the_failures_leave_its_window(a44_env):
    env = a44_env
    start = env.now
    _rule_and_channel(env)
    env.mock("connector/payments.charge", Fail("E_UPSTREAM_400"))
    env.publish(FLAKY)
    env.run("flaky", {"n": 0})            # the failed series exists; its samples must cover 10 m to be judged
    env.advance("11m")                     # the evaluator samples the whole window: an increase of 0, no alert
    assert _alerts(env) == []
    failed_at = env.now
    runs = [env.run("flaky", {"n": i}) for i in range(1, 4)]
    assert {r.state for r in runs} == {"failed"}
    assert _alerts(env) == []

    env.advance("30m")

    fired = _grid_after(start, failed_at, INTERVAL)             # the first round after the failures sees them
    # increase(10m) drops to 0 at the first round whose window (10 m and half an interval) starts after the last
    # sample before the failures (the round at failed_at)
    resolved = _grid_after(start, failed_at + timedelta(minutes=10) + TOLERANCE, INTERVAL)
    assert _alerts(env) == [{"rule": "failures", "state": "resolved", "opened_at": fired, "resolved_at": resolved}]


def test_a_counter_series_born_with_the_failure_fires_its_increase_rule(a44_env):
    """The first failed run of the project: the `state="failed"` series appears only with it. It counts from 0
    (the project was sampled before), so increase(10m) > 0 fires at the first round that sees it, instead of
    waiting 10 m for the window to be covered and then seeing an increase of 0 forever (the silent failure)."""
    env = a44_env
    start = env.now
    _rule_and_channel(env)
    env.mock("connector/payments.charge", Ok({"id": "ch_1"}))
    env.publish(FLAKY)
    assert env.run("flaky", {"n": 0}).state == "succeeded"    # the project is sampled; no failed series yet
    env.advance("11m")
    assert _alerts(env) == []
    failed_at = env.now
    env.mock("connector/payments.charge", Fail("E_UPSTREAM_400"))
    assert env.run("flaky", {"n": 1}).state == "failed"       # the failed series is born here
    env.advance("30m")
    fired = _grid_after(start, failed_at, INTERVAL)
    opened = [a["opened_at"] for a in _alerts(env)]
    assert opened == [fired]


def test_a_notification_whose_channel_fails_is_retried_at_its_backoff_instants(a44_env):
    env = a44_env
    _rule_and_channel(env)                 # oncall's secret sec_hook does not exist: every send fails, retryable
    env.mock("connector/payments.charge", Fail("E_UPSTREAM_400"))
    env.publish(FLAKY)
    env.run("flaky", {"n": 0})
    env.advance("11m")
    env.run("flaky", {"n": 1})
    env.advance("16s")                     # the alert fires: its message is enqueued and sent at once (and fails)
    [firing] = [n for n in env.notifications() if n["kind"] == "firing"]
    rng, settings = random.Random(7), DeliverySettings()     # the kit's deliverer draws its jitter from the seed
    at = firing["created_at"]
    for attempt in range(1, 5):
        n = next(x for x in env.notifications() if x["id"] == firing["id"])
        assert (n["state"], n["attempts"]) == ("pending", attempt)
        at = at + settings.backoff(attempt, rng)
        assert n["next_attempt_at"] == at
        env.advance(at - env.now)         # to the retry's instant: the kit sends it there
    assert next(x for x in env.notifications() if x["id"] == firing["id"])["attempts"] == 5


def test_retention_archives_drops_and_deletes_at_its_hourly_round(a44_env):
    env = a44_env                          # starts 2026-07-19T14:02:11Z; hot retention 30 days
    env.mock("connector/payments.charge", Ok({"charge": "ch_1"}))
    env.publish(FLAKY)
    run = env.run("flaky", {})
    assert run.state == "succeeded"
    first_round = env.now + timedelta(seconds=60)              # retention_loop: 60 s after start, then hourly
    # the day 2026-07-19 is archived at the first round whose cutoff (midnight, 30 days back) passes it
    archived = _grid_after(first_round, datetime(2026, 8, 19, tzinfo=UTC) - timedelta(microseconds=1),
                           timedelta(hours=1))
    # July's partition goes when August 1 is 30 days back, and the run (ended before the oldest month left) with it
    dropped = _grid_after(first_round, datetime(2026, 8, 31, tzinfo=UTC) - timedelta(microseconds=1),
                          timedelta(hours=1))

    env.advance(archived - env.now - timedelta(seconds=1))
    assert _archived_days(env) == []
    env.advance("1s")
    assert [d.isoformat() for d in _archived_days(env)] == ["2026-07-19"]
    assert len(env.runs("flaky")) == 1

    env.advance(dropped - env.now - timedelta(seconds=1))
    assert len(env.runs("flaky")) == 1
    env.advance("1s")
    assert env.runs("flaky") == []
    assert "step_attempts_y2026m07" not in {p["name"] for p in env.call(env.store.list_partitions())}


def _archived_days(env):
    return [r["day"] for r in env.call(env.store.pool.fetch("select day from automation.log_archive_days"))]
