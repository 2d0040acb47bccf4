"""`kind: channel` and `kind: alert` files published like queues (docs/alerts.md "Files"): channels upsert
automation.notification_channels with the config shapes the delivery worker reads, rules are stored as
`a44 monitor alert create` stores them, a second publish is unchanged, and a rule naming a channel neither the
files nor the project have refuses the whole publish before anything is written."""

from __future__ import annotations

import json

import pytest

from anthares44.automation.app.publishing import publish
from anthares44.automation.errors import A44Error
from tests.runtime.pg import query

P = "pj_files"
CHANNELS = """\
- kind: channel
  id: squad-billing
  type: webhook
  url: https://hooks.example.com/a44
  secretRef: sec_billing_hook
- kind: channel
  id: oncall
  type: slack
  url: https://hooks.slack.example/T000/B000
- kind: channel
  id: billing-mail
  type: email
  from: a44@example.com
  to: [billing@example.com, finance@example.com]
  smtp: {host: smtp.example.com, port: 2525, starttls: false, passwordSecretRef: sec_smtp}
"""
ALERT = """\
kind: alert
name: dlq-invoice-settle
metric: automation.dlq_depth
filter: queue="q_invoice_settle"
condition: min_over_time(10m) > 0
severity: p2
notify: {notify}
escalateTo: oncall
suppressWindow: 30m
updateEvery: 25
"""


def _files(tmp_path, notify="squad-billing", channels=True):
    d = tmp_path / "monitoring"
    d.mkdir(exist_ok=True)
    if channels:
        (d / "channels.yaml").write_text(CHANNELS)
    (d / "alerts.yaml").write_text(ALERT.format(notify=notify))
    return [str(d)]


def test_channels_and_rules_are_published(store, aio, pg_url, tmp_path):
    report = aio(publish(store, P, _files(tmp_path)))
    assert report.ok and report.diagnostics == []
    assert report.channels == [("billing-mail", "created"), ("oncall", "created"), ("squad-billing", "created")]
    assert report.alerts == [("dlq-invoice-settle", "created")]
    configs = {r[0]: (r[1], json.loads(r[2])) for r in query(
        pg_url, "select name, kind, config from automation.notification_channels where project_id = $1", P)}
    assert configs == {
        "squad-billing": ("webhook", {"url": "https://hooks.example.com/a44", "secretRef": "sec_billing_hook"}),
        "oncall": ("slack", {"url": "https://hooks.slack.example/T000/B000"}),
        "billing-mail": ("email", {"from": "a44@example.com", "to": ["billing@example.com", "finance@example.com"],
                                   "smtp": {"host": "smtp.example.com", "port": 2525, "starttls": False,
                                            "passwordSecretRef": "sec_smtp"}})}
    assert query(pg_url, "select metric, filter, condition, severity, notify, escalate_to, suppress_window_s, "
                         "update_every, origin from automation.alert_rules") == [
        ("automation.dlq_depth", 'queue="q_invoice_settle"', "min_over_time(10m) > 0", "p2", "squad-billing",
         "oncall", 1800.0, 25, "yaml")]
    again = aio(publish(store, P, _files(tmp_path)))
    assert {o for _, o in again.channels + again.alerts} == {"unchanged"}


def test_a_rule_naming_an_unknown_channel_writes_nothing(store, aio, pg_url, tmp_path):
    (tmp_path / "q.yaml").write_text("id: q_invoice_settle\nmaxConcurrency: 5\n")
    paths = _files(tmp_path, notify="squad-biling") + [str(tmp_path / "q.yaml")]
    with pytest.raises(A44Error) as err:
        aio(publish(store, P, paths))
    assert err.value.code == "E_ALERT_CHANNEL_UNKNOWN" and "did you mean squad-billing?" in err.value.hint
    for table in ("notification_channels", "alert_rules", "queues"):
        assert query(pg_url, f"select count(*) from automation.{table}") == [(0,)], table


def test_a_channel_the_project_already_has_is_enough(store, aio, pg_url, tmp_path):
    for name in ("squad-billing", "oncall"):
        aio(store.fetchval("alert_channel_upsert", project=P, name=name, kind="slack",
                           config='{"url": "http://127.0.0.1:9/"}', now=store.clock.now()))
    report = aio(publish(store, P, _files(tmp_path, channels=False)))
    assert report.alerts == [("dlq-invoice-settle", "created")] and report.channels == []
