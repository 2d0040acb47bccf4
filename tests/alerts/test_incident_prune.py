"""Incidents (one per cause and channel, so one per failed run) are pruned once none of their alerts fires and they
are older than the samples kept: the sampler's round forgets them, and keeps every incident still needed."""

from datetime import timedelta

from anthares44.automation.runtime.alerts import sampler
from tests.runtime.pg import query

P = "pj_default"


def _alert(url: str, alert_id: str, state: str, at) -> None:
    query(url,
        "insert into automation.alerts (alert_id, project_id, rule, group_key, state, severity, machine, context, "
        "opened_at, updated_at) values ($1, $2, 'builtin:run_failed', $1, $3, 'p2', '{}', '{}', $4, $4)",
        alert_id, P, state, at)


def _incident(url: str, cause: str, alert_id: str, at) -> None:
    query(url,
        "insert into automation.alert_incidents (project_id, channel, cause, notification_id, alert_ids, rules, "
        "opened_at, updated_at) values ($1, 'ops', $2, 1, array[$3], array['builtin:run_failed'], $4, $4)",
        P, cause, alert_id, at)


def test_the_sampler_forgets_incidents_no_alert_fires_for_and_keeps_the_rest(store, pg_url, aio):
    now = store.clock.now()
    old, recent = now - timedelta(days=2), now - timedelta(minutes=5)
    _alert(pg_url, "alr_resolved", "resolved", old)
    _alert(pg_url, "alr_firing", "firing", old)
    _incident(pg_url, "run:old-resolved", "alr_resolved", old)      # pruned: old, nothing fires
    _incident(pg_url, "run:old-firing", "alr_firing", old)          # kept: its alert still fires
    _incident(pg_url, "run:recent", "alr_resolved", recent)         # kept: younger than what is kept
    aio(sampler.record(store, [], now, keep=timedelta(hours=1)))
    left = query(pg_url, "select cause from automation.alert_incidents order by cause")
    assert [r["cause"] for r in left] == ["run:old-firing", "run:recent"]
