"""`a44 monitor alert create | list | show | test | rm | builtin` and `a44 monitor alerts` as a user types them
(in-process through cli.main, on the test database): the manual's line works as written, every mistake is a coded
usage error with a did-you-mean that writes nothing, and `test` judges stored samples without sending anything."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.store.core import Store
from tests.cli_support import run_cli
from tests.runtime.pg import query

P = "pj_default"
MANUAL = ["alert", "create", "--name", "dlq-invoice-settle", "--metric", "automation.dlq_depth",
          "--filter", 'queue="q_invoice_settle"', "--condition", "min_over_time(10m) > 0",
          "--severity", "p2", "--notify", "squad-billing"]


@pytest.fixture
def db(pg_url, monkeypatch, aio, tmp_path):
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    monkeypatch.delenv("A44_PROJECT", raising=False)
    s = aio(Store.connect(pg_url, clock=SystemClock(), results_dir=tmp_path / "results"))
    for name in ("squad-billing", "oncall"):
        aio(s.fetchval("alert_channel_upsert", project=P, name=name, kind="slack",
                       config=json.dumps({"url": "http://127.0.0.1:9/hook"}), now=s.clock.now()))
    yield s
    aio(s.close())


def monitor(capsys, *argv):
    return run_cli(capsys, "monitor", *argv)


def test_the_manuals_line_as_written(db, capsys, pg_url):
    code, out, err = monitor(capsys, *MANUAL)
    assert (code, err) == (0, "")
    assert out == ('created alert rule dlq-invoice-settle: automation.dlq_depth{queue="q_invoice_settle"} '
                   "min_over_time(10m) > 0 -> squad-billing (p2)\n")
    assert monitor(capsys, *MANUAL)[1].startswith("unchanged alert rule dlq-invoice-settle")

    code, out, _ = monitor(capsys, "alert", "list")
    assert code == 0
    assert out.splitlines()[0].split() == ["NAME", "METRIC", "FILTER", "CONDITION", "SEVERITY", "NOTIFY",
                                           "ESCALATE_TO", "WINDOW", "EVERY"]
    assert "dlq-invoice-settle  automation.dlq_depth  queue=\"q_invoice_settle\"  min_over_time(10m) > 0" in out

    code, out, _ = monitor(capsys, "alert", "show", "dlq-invoice-settle", "--format", "json")
    doc = json.loads(out)
    assert (doc["severity"], doc["notify"], doc["suppress_window_s"], doc["update_every"]) == (
        "p2", "squad-billing", 600.0, 10)

    code, out, _ = monitor(capsys, "alert", "create", "--name", "dlq-invoice-settle", "--metric",
                           "automation.dlq_depth", "--condition", "> 5", "--notify", "squad-billing",
                           "--escalate-to", "oncall", "--suppress-window", "30m", "--update-every", "25")
    assert out == ("updated alert rule dlq-invoice-settle: automation.dlq_depth > 5 -> squad-billing, escalates to "
                   "oncall (p3)\n")

    assert monitor(capsys, "alert", "rm", "dlq-invoice-settle") == (0, "removed alert rule dlq-invoice-settle\n", "")
    code, _, err = monitor(capsys, "alert", "rm", "dlq-invoice-setle")
    assert code == 1 and err.startswith("E_ALERT_RULE_NOT_FOUND project pj_default has no alert rule 'dlq-invoice-setle'")
    assert query(pg_url, "select count(*) from automation.alert_rules")[0][0] == 0


@pytest.mark.parametrize("change, code, hint", [
    (("--metric", "automation.dlq_dept"), "E_ALERT_METRIC", "did you mean automation.dlq_depth?"),
    (("--notify", "squad-biling"), "E_ALERT_CHANNEL_UNKNOWN", "did you mean squad-billing?"),
    (("--filter", 'queu="q"'), "E_ALERT_FILTER", "did you mean queue?"),
    (("--filter", 'queue=q'), "E_ALERT_FILTER", "label=\"value\""),
    (("--condition", "min_ovr_time(10m) > 0"), "E_ALERT_CONDITION", "did you mean min_over_time?"),
    (("--condition", "rate(10m) >> 1"), "E_ALERT_CONDITION", "e.g. min_over_time(10m) > 0"),
    (("--suppress-window", "ten minutes"), "E_ALERT_RULE_INVALID", None),
    (("--update-every", "0"), "E_ALERT_RULE_INVALID", None),
])
def test_mistakes_are_coded_usage_errors_that_write_nothing(db, capsys, pg_url, change, code, hint):
    argv = list(MANUAL)
    if change[0] in argv:
        argv[argv.index(change[0]) + 1] = change[1]
    else:
        argv += change
    exit_code, out, err = monitor(capsys, *argv)
    assert (exit_code, out) == (2, "")
    assert err.startswith(code + " ")
    assert "Traceback" not in err
    if hint:
        assert hint in err
    assert query(pg_url, "select count(*) from automation.alert_rules")[0][0] == 0


def test_test_judges_the_stored_samples_and_sends_nothing(db, capsys, aio, pg_url):
    assert monitor(capsys, *MANUAL)[0] == 0
    now = db.clock.now()
    for i in range(41):      # every 15 s for the last 10 minutes: depth 3 on q_invoice_settle, 0 on another queue
        aio(db.execute("alert_samples_add", projects=[P, P], metrics=["automation.dlq_depth"] * 2,
                       labels=['{"queue":"q_invoice_settle"}', '{"queue":"q_other"}'], values=[3.0, 0.0],
                       at=now - timedelta(seconds=600 - 15 * i)))
    code, out, err = monitor(capsys, "alert", "test", "dlq-invoice-settle")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "dlq-invoice-settle: automation.dlq_depth min_over_time(10m) > 0: FIRING (nothing sent)",
        '  {queue="q_invoice_settle"}  value 3  firing  (min_over_time, 41 samples)']
    assert query(pg_url, "select count(*) from automation.notifications")[0][0] == 0
    assert query(pg_url, "select count(*) from automation.alerts")[0][0] == 0


def test_builtin_routing_and_the_alerts_listing(db, capsys, aio):
    code, out, _ = monitor(capsys, "alert", "builtin", "--notify", "squad-billing", "--escalate-to", "oncall")
    assert out == "created alert rule built-in alerts -> squad-billing, escalates to oncall (p2)\n"
    code, _, err = monitor(capsys, "alert", "create", "--name", "builtin", "--metric", "automation.runs",
                           "--condition", "> 0")
    assert code == 2 and err.startswith("E_ALERT_RULE_INVALID")
    code, _, err = monitor(capsys, "alert", "test", "builtin")
    assert code == 2 and "no condition to test" in err

    from anthares44.automation.runtime.alerts import ledger
    from anthares44.automation.runtime.alerts import suppression as sm
    policy = sm.Policy("squad-billing", "oncall", "p2", 600, 10)
    aio(ledger.record(db, project=P, rule="builtin:run_failed", group_key="wf_a/E_X", policy=policy,
                      context={"title": "wf_a run failed: E_X at step s", "error_code": "E_X", "error_message": "boom",
                               "next_action": "a44 automation replay run_1 --from-step s --project pj_default"},
                      now=db.clock.now()))
    code, out, _ = monitor(capsys, "alerts")
    lines = out.splitlines()
    assert lines[0].split() == ["ALERT", "RULE", "GROUP", "STATE", "SEVERITY", "COUNT", "OPENED", "RESOLVED"]
    assert "builtin:run_failed  wf_a/E_X  firing  p2        1" in lines[1]
    assert "  error: E_X boom" in lines
    assert "  next: a44 automation replay run_1 --from-step s --project pj_default" in lines
    assert lines[-1].split()[2:] == ["firing", "count", "1", "squad-billing"]
    doc = json.loads(monitor(capsys, "alerts", "--format", "json")[1])
    assert [h["kind"] for h in doc["alerts"][0]["history"]] == ["firing"]
