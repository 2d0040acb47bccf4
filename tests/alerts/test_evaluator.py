"""The alert evaluator on the real store and the real engine, time moved by a ManualClock: the built-in alerts on
runs the interpreter failed (with the context and next command the second seed asks for) and their resolution on
a success, DLQ growth, a rule on sampled metrics that needs its whole window, one evaluator at a time, and
/metrics' automation_alerts_firing."""

from __future__ import annotations

import json

from anthares44.automation.app.metrics import collect
from anthares44.automation.grammar.alert_rules import check_rule
from anthares44.automation.runtime.alerts import rules as rule_store
from anthares44.automation.runtime.alerts.evaluator import Evaluator
from tests.runtime.engine_support import PROJECT, Script, engine, node, publish_and_run, workflow
from tests.runtime.pg import query


def _notifications(pg_url):
    return [(r[0], r[1], r[2], json.loads(r[3])) for r in query(
        pg_url, "select kind, channel, severity, payload from automation.notifications order by id")]


def _channels(store, aio, *names):
    for name in names:
        aio(store.fetchval("alert_channel_upsert", project=PROJECT, name=name, kind="webhook",
                           config=json.dumps({"url": "http://127.0.0.1:9/h", "secretRef": "sec_hook"}),
                           now=store.clock.now()))


def test_failed_runs_raise_one_alert_with_context_and_a_success_resolves_it(store, clock, aio, pg_url):
    _channels(store, aio, "squad-billing")
    aio(rule_store.upsert_builtin(store, PROJECT, notify="squad-billing", escalate_to=None, severity="p2",
                                  window_s=600, update_every=2))
    ir = workflow([node("reserve"), node("settle")], name="invoice_settle")
    s = Script(plan={"settle": ["perm"] * 3})
    runs = [aio(publish_and_run(store, ir, key=f"k{i}")) for i in range(3)]
    aio(engine(store, s, clock=clock).drive())
    ev = Evaluator(store, holder="d1", interval_s=15)
    assert aio(ev.step()) is True

    rows = _notifications(pg_url)
    assert [(k, c, sev, p["count"]) for k, c, sev, p in rows] == [("firing", "squad-billing", "p2", 1),
                                                                 ("update", "squad-billing", "p2", 3)]
    firing = rows[0][3]
    assert firing["rule"] == "builtin:run_failed" and firing["workflow"] == "wf_invoice_settle"
    first = firing["run_id"]
    assert first in runs
    assert (firing["failed_step"], firing["partition_key"], firing["error_code"], firing["attempts"]) == (
        "settle", None, "E_UPSTREAM_400", 1)
    assert firing["error_message"] == "the far side answered 400"
    assert firing["next_action"] == f"a44 automation replay {first} --from-step settle --project {PROJECT}"
    assert sorted(rows[1][3]["runs_seen"]) == sorted(runs) and rows[1][3]["steps_seen"] == ["settle"]
    assert aio(ev.step()) is True          # read again: nothing new
    assert len(_notifications(pg_url)) == 2

    families = {f.name: f for f in aio(collect(store))}
    assert families["automation_alerts_firing"].samples == [
        ("automation_alerts_firing", {"project": PROJECT, "rule": "builtin:run_failed", "severity": "p2"}, 1)]

    aio(publish_and_run(store, ir, key="ok"))
    aio(engine(store, s, clock=clock).drive())
    clock.advance(15)
    aio(ev.step())
    assert [(k, p["count"]) for k, _, _, p in _notifications(pg_url)][-1] == ("resolved", 3)
    assert [f.samples for f in aio(collect(store)) if f.name == "automation_alerts_firing"] == [[]]

    clock.advance(61)       # the outcomes are old enough that none can still be committing: the horizon passes them
    aio(ev.step())
    newest = query(pg_url, "select max(id) from automation.run_events where kind = 'run.state'")[0][0]
    assert query(pg_url, "select event_horizon from automation.alert_evaluator") == [(newest,)]
    assert query(pg_url, "select count(*) from automation.alert_seen") == [(0,)]


def test_without_a_channel_the_alert_is_recorded_and_logged(store, clock, aio, pg_url, caplog):
    ir = workflow([node("settle")], name="lonely")
    run_id = aio(publish_and_run(store, ir))
    aio(engine(store, Script(plan={"settle": ["perm"]}), clock=clock).drive())
    with caplog.at_level("WARNING", logger="a44.alerts"):
        aio(Evaluator(store, holder="d1").step())
    assert _notifications(pg_url) == []
    assert query(pg_url, "select rule, state from automation.alerts") == [("builtin:run_failed", "firing")]
    # only the evaluator's lines: a garbage collection during the step may log another test's leftovers (asyncio)
    [line] = [r.getMessage() for r in caplog.records if r.name == "a44.alerts"]
    assert "builtin:run_failed firing (1)" in line
    assert line.endswith(f"no channel: a44 automation replay {run_id} --from-step settle --project {PROJECT}")


def _dead_letter(pg_url, i: int, queue: str = "q_invoice_settle"):
    query(pg_url, "insert into automation.dead_letters (dead_letter_id, project_id, queue, workflow_id, envelope, "
                  "error_code, error_message, attempts, created_at, step_id, run_id, partition_key) values "
                  "($1, $2, $3, 'wf_invoice_settle', '{}', 'E_UPSTREAM_503', 'the far side answered 503', 5, now(),"
                  " 'settle', $4, $5)", f"dlq_{i:04d}", PROJECT, queue, f"run_{i}", f"inv-{i}")


def test_a_rule_needs_its_whole_window_and_dlq_growth_is_built_in(store, clock, aio, pg_url):
    _channels(store, aio, "squad-billing", "oncall")
    rule = check_rule(name="dlq-invoice-settle", metric="automation.dlq_depth", filter='queue="q_invoice_settle"',
                      condition="min_over_time(10m) > 0", severity="p2", notify="squad-billing",
                      escalate_to="oncall", suppress_window="30m", update_every=1000)
    aio(rule_store.upsert(store, PROJECT, rule))
    ev = Evaluator(store, holder="d1", interval_s=15)
    for i in range(2):
        _dead_letter(pg_url, i)
    aio(ev.step())
    # the built-in sees the DLQ grow by 2 at once; the rule has 1 sample of 10 minutes
    assert _notifications(pg_url) == []     # no built-in routing: recorded, not sent
    [(rule_name, payload)] = query(pg_url, "select rule, context from automation.alerts")
    ctx = json.loads(payload)
    assert rule_name == "builtin:dlq_growth" and ctx["dlq_depth"] == 2
    assert ctx["next_action"] == ("a44 automation dlq redrive q_invoice_settle --filter "
                                  "\"error_code == 'E_UPSTREAM_503'\" --project pj_default")
    for _ in range(39):
        clock.advance(15)
        aio(ev.step())
    assert _notifications(pg_url) == []      # 9m45s of samples: not yet "for 10 minutes"
    clock.advance(15)
    aio(ev.step())
    [(kind, channel, sev, p)] = _notifications(pg_url)
    assert (kind, channel, sev, p["rule"], p["value"], p["labels"]) == (
        "firing", "squad-billing", "p2", "dlq-invoice-settle", 2.0, {"queue": "q_invoice_settle"})
    query(pg_url, "update automation.dead_letters set redriven_at = now()")
    clock.advance(15)
    aio(ev.step())          # one sample at 0 in the window: its minimum is 0
    assert [(r[0], r[1]) for r in _notifications(pg_url)] == [("firing", "squad-billing"),
                                                              ("resolved", "squad-billing")]
    assert query(pg_url, "select count(*) from automation.alerts where state = 'firing'") == [(0,)]


def test_one_evaluator_at_a_time(store, clock, aio):
    a, b = Evaluator(store, holder="d1", interval_s=15), Evaluator(store, holder="d2", interval_s=15)
    assert aio(a.step()) is True
    assert aio(b.step()) is False
    clock.advance(30)
    assert aio(a.step()) is True and aio(b.step()) is False      # renewed
    clock.advance(46)                                             # d1 died: its lease (3 intervals) expired
    assert aio(b.step()) is True and aio(a.step()) is False


def test_compensation_failed_and_awaiting_confirmation_carry_what_to_do(store, clock, aio, pg_url):
    import asyncio

    from anthares44.automation.runtime.engine import resolve_confirmation

    _channels(store, aio, "squad-billing")
    aio(rule_store.upsert_builtin(store, PROJECT, notify="squad-billing", escalate_to=None, severity="p1",
                                  window_s=600, update_every=10))
    act, undo = Script(plan={"d": ["perm"], "pay": ["block:never", "ok"]}), Script("undo", plan={"c": ["perm"] * 3})
    saga = aio(publish_and_run(store, workflow([node("c", compensate="undo"), node("d", retry=(3, "fixed"))],
                                               name="saga"), key="s"))
    eng = engine(store, act, undo, clock=clock)
    for wait in (0, 5, 20, 60):
        clock.advance(wait)
        aio(eng.drive())
    parked = aio(publish_and_run(store, workflow([node("pay", exclusive=True)], name="pay"), key="p"))

    async def start_and_die():
        task = asyncio.create_task(engine(store, act, clock=clock, worker_id="dead").run_once())
        while not act.called("pay"):
            await asyncio.sleep(0.01)
        task.cancel()
        with __import__("contextlib").suppress(asyncio.CancelledError):
            await task
    aio(start_and_die())
    clock.advance(31)
    assert aio(engine(store, act, clock=clock, worker_id="w2").drive()) == {parked: "awaiting_confirmation"}
    ev = Evaluator(store, holder="d1", interval_s=15)
    aio(ev.step())

    by_rule = {p["rule"]: p for _, _, _, p in _notifications(pg_url)}
    comp = by_rule["builtin:compensation_failed"]
    assert (comp["run_id"], comp["workflow"], comp["error_code"], comp["severity"]) == (
        saga, "wf_saga", "E_COMPENSATION_FAILED", "p1")
    assert (comp["compensation_step"], comp["compensation_error_code"]) == ("c", "E_UPSTREAM_400")
    assert comp["next_action"].startswith(f"a44 automation logs {saga} --project {PROJECT}")
    wait = by_rule["builtin:awaiting_confirmation"]
    assert (wait["run_id"], wait["failed_step"], wait["error_code"]) == (parked, "pay", "E_EXCLUSIVE_UNCONFIRMED")
    assert wait["next_action"] == (f"a44 automation runs resolve {parked} --step pay "
                                   f"--outcome succeeded|failed|retry --project {PROJECT}")

    aio(resolve_confirmation(store, parked, "pay", "failed", by="ops@example"))
    clock.advance(15)
    aio(ev.step())
    assert [(k, p["rule"]) for k, _, _, p in _notifications(pg_url)][-1] == ("resolved",
                                                                           "builtin:awaiting_confirmation")
    assert query(pg_url, "select rule from automation.alerts where state = 'firing'") == [
        ("builtin:compensation_failed",)]


def test_a_broken_rule_does_not_stop_the_others(store, clock, aio, pg_url, caplog):
    _channels(store, aio, "squad-billing")
    for name, cond in (("broken", "> 0"), ("runs-failed", "> 0")):
        aio(rule_store.upsert(store, PROJECT, check_rule(name=name, metric="automation.runs", condition=cond,
                                                         filter='state="failed"', notify="squad-billing")))
    query(pg_url, "update automation.alert_rules set condition = 'min_over_time(10x) > 0' where name = 'broken'")
    aio(publish_and_run(store, workflow([node("settle")], name="w"), key="x"))
    aio(engine(store, Script(plan={"settle": ["perm"]}), clock=clock).drive())
    with caplog.at_level("WARNING", logger="a44.alerts"):
        assert aio(Evaluator(store, holder="d1").step()) is True
    assert "alert rule broken of pj_default cannot be evaluated: E_ALERT_CONDITION" in caplog.text
    assert [(p["rule"], p["value"]) for _, _, _, p in _notifications(pg_url) if p["rule"] != "builtin:run_failed"] \
        == [("runs-failed", 1.0)]
