"""The alerts an operator meets in the first incident (issue 25 items 1-4), every part real: runs on the real
compiler, interpreter and http connector against a loopback export API, the alert evaluator, and the notification
deliverer sending to a loopback webhook receiver that verifies the signature.

- a `partial` run raises `builtin:run_partial` (and `builtin:expectation_failed` when an `expect:` caught a day),
  as ONE message naming both rules, with the failed partitions (key, error code, error type, attempts) as data and
  `replay RUN --failed-partitions`, which pastes as printed;
- a fan-out step that fails the run names its failed partitions the same way;
- a rule on automation.dlq_depth names the dead letters behind its value (runs, codes, workflow, attempts,
  partition) and the redrive command;
- one dead-lettered failure is one incident: one message naming run_failed, dlq_growth and the DLQ rule, and a
  rule that matches later sends nothing of its own while the incident fires."""

from __future__ import annotations

import json
import random
import shlex

from anthares44.automation.compiler.ir import to_json
from anthares44.automation.compiler.models.queues import Queue
from anthares44.automation.grammar.alert_rules import check_rule
from anthares44.automation.runtime.alerts import rules as rule_store
from anthares44.automation.runtime.alerts.evaluator import Evaluator
from anthares44.automation.runtime.notify import channels
from anthares44.automation.runtime.notify.delivery import Deliverer
from anthares44.automation.runtime.queues import deliver_envelope, store_queues
from anthares44.automation.runtime.secrets.source import SecretSource
from tests.cli_support import run_cli
from tests.connectors.conftest import serve  # noqa: F401  (the loopback aiohttp server fixture)
from tests.notify.conftest import FAST, SECRET
from tests.notify.receivers import HttpReceiver
from tests.partitions.support import DailyApi, compile_yaml, start
from tests.runtime.engine_support import PROJECT, Script, engine, node, workflow
from tests.runtime.pg import query

BAD, EMPTY, SLOW = "2026-07-04", "2026-07-06", "2026-07-09"

YAML = """\
name: daily-load
version: 1
steps:
  - id: load
    uses: http
    timeout: 500ms
    retry: {{max: 1, strategy: fixed, base: 10ms}}
    url: "{base}/day/{{{{ partition }}}}"
    rows: {{in: "result.json.rows.in", out: "result.json.rows.out", error: "result.json.rows.error"}}
    expect: "rows.in > 0"
    partitions:
      range: {{from: "input.from", to: "input.to", every: 1d}}
      concurrency: 4
    onPartitionFailure: {on_failure}
  - id: report
    uses: pass
    timeout: 1s
"""


class Inbox:
    """A webhook channel on a loopback receiver, the built-in alerts routed to it, and a deliverer."""

    def __init__(self, store, aio):
        self.store, self.aio = store, aio
        self.hook = HttpReceiver(secret=SECRET)
        self.deliverer = Deliverer(store, SecretSource({"sec_hook": SECRET}, use_env=False), FAST,
                                   rng=random.Random(1))
        aio(channels.create(store, PROJECT, "squad-billing", "webhook",
                            {"url": self.hook.hook, "secretRef": "sec_hook"}))
        aio(rule_store.upsert_builtin(store, PROJECT, notify="squad-billing", escalate_to=None, severity="p2",
                                      window_s=600, update_every=10))
        self.ev = Evaluator(store, holder="d1", interval_s=15)

    def round(self) -> list[dict]:
        """One evaluator round, then deliver what is due; the messages received so far."""
        assert self.aio(self.ev.step()) is True
        self.aio(self.deliverer.deliver_due())
        assert all(r["verified"] for r in self.hook.requests)
        return [json.loads(r["body"]) for r in self.hook.requests]

    def close(self):
        self.aio(self.deliverer.close())
        self.hook.close()


def test_a_partial_run_alerts_once_with_its_failed_partitions_and_the_command(
        store, clock, aio, serve, tmp_path, pg_url, monkeypatch, capsys):
    api = DailyApi()
    api.reject, api.empty, api.hang = {BAD}, {EMPTY}, {SLOW}
    ir = compile_yaml(tmp_path, YAML.format(base=serve(api.app()), on_failure="partial"))
    inbox = Inbox(store, aio)
    try:
        eng, run_id, run = aio(start(store, clock, ir, "2026-07-01", "2026-07-10"))
        assert run["state"] == "partial"
        [msg] = inbox.round()
        p = msg["payload"]
        assert (msg["kind"], p["rule"], p["rules"]) == ("firing", "builtin:run_partial",
                                                       ["builtin:run_partial", "builtin:expectation_failed"])
        assert [m["rule"] for m in p["matched"]] == p["rules"]
        assert (p["workflow"], p["run_id"], p["state"], p["failed_step"]) == ("wf_daily_load", run_id, "partial",
                                                                             "load")
        assert [(f["partition"], f["error_code"], f["error_type"], f["attempts"]) for f in p["failed_partitions"]] \
            == [(BAD, "E_UPSTREAM_422", "permanent", 1), (EMPTY, "E_EXPECTATION_FAILED", "expectation", 1),
                (SLOW, "E_STEP_TIMEOUT", "timeout", 2)]
        assert p["partitions_seen"] == [BAD, EMPTY, SLOW] and p["partition_key"] == BAD
        assert p["failed_partition_count"] == 3 and p["attempts"] == 4
        assert p["next_action"] == f"a44 automation replay {run_id} --failed-partitions --project {PROJECT}"
        assert aio(inbox.deliverer.deliver_due()) == 0 and len(inbox.round()) == 1    # nothing more to say

        # the command pastes as printed: it re-runs exactly the three failed days
        monkeypatch.setenv("A44_DATABASE_URL", pg_url)
        argv = shlex.split(p["next_action"])
        assert argv[0] == "a44"
        code, out, err = run_cli(capsys, *argv[1:], "--dry-run")
        assert code == 0, err
        plan = json.loads(out)
        assert plan["matched"] == 1 and plan["perRun"]["reused"] == [
            f"load[2026-07-{d:02d}]" for d in (1, 2, 3, 5, 7, 8, 10)], plan     # every day but the failed three
        aio(eng.registry.aclose())
    finally:
        inbox.close()


def test_a_fan_out_that_fails_the_run_names_its_partitions(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    api.reject = {BAD}
    ir = compile_yaml(tmp_path, YAML.format(base=serve(api.app()), on_failure="fail"))
    inbox = Inbox(store, aio)
    try:
        eng, run_id, run = aio(start(store, clock, ir, "2026-07-01", "2026-07-05"))
        assert (run["state"], run["error_code"]) == ("failed", "E_PARTITIONS_FAILED")
        [msg] = inbox.round()
        p = msg["payload"]
        assert p["rule"] == "builtin:run_failed" and p["rules"] == ["builtin:run_failed"]
        assert [(f["step"], f["partition"], f["error_code"]) for f in p["failed_partitions"]] == [
            ("load", BAD, "E_UPSTREAM_422")]
        assert (p["partition_key"], p["partitions_seen"], p["failed_step"]) == (BAD, [BAD], "load")
        assert p["next_action"] == f"a44 automation replay {run_id} --failed-partitions --project {PROJECT}"
        aio(eng.registry.aclose())
    finally:
        inbox.close()


def _dead_lettered_failure(store, aio, clock, key: str) -> str:
    """A run of wf_invoice_settle (queue q_invoice_settle, maxAttempts 1) that fails for good: dead-lettered."""
    ir = workflow([node("settle")], name="invoice_settle").model_copy(update={"queue": "q_invoice_settle"})
    aio(store_queues(store, PROJECT, [Queue(id="q_invoice_settle", maxAttempts=1)]))
    aio(store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir)))
    env = {"id": f"evt_{key.replace('-', '')}", "type": "billing.invoice.settle", "idempotency_key": key,
           "partition_key": key, "occurred_at": clock.now().isoformat(), "data": {"invoice": key}}
    run_id = aio(deliver_envelope(store, PROJECT, ir.workflow_id, json.dumps(env).encode()))["run_id"]
    aio(engine(store, Script(plan={"settle": ["perm"]}), clock=clock).drive())
    return run_id


def _dlq_rule(store, aio, condition: str):
    aio(rule_store.upsert(store, PROJECT, check_rule(
        name="dlq-invoice-settle", metric="automation.dlq_depth", filter='queue="q_invoice_settle"',
        condition=condition, severity="p2", notify="squad-billing", suppress_window="30m", update_every=1000)))


def test_one_dead_lettered_failure_is_one_message_naming_every_rule(store, clock, aio, pg_url):
    inbox = Inbox(store, aio)
    try:
        _dlq_rule(store, aio, "> 0")
        run_id = _dead_lettered_failure(store, aio, clock, "inv-1")
        assert query(pg_url, "select run_id from automation.dead_letters") == [(run_id,)]
        [msg] = inbox.round()
        p = msg["payload"]
        assert p["rules"] == ["builtin:run_failed", "builtin:dlq_growth", "dlq-invoice-settle"], p["rules"]
        assert p["rule"] == "builtin:run_failed" and p["run_id"] == run_id
        assert {m["rule"]: m["next_action"] for m in p["matched"]}["dlq-invoice-settle"].startswith(
            "a44 automation dlq redrive q_invoice_settle --filter \"error_code == 'E_UPSTREAM_400'\"")
        assert p["redrive_action"].startswith("a44 automation dlq redrive q_invoice_settle")
        # the three alerts still live their own lives: each is recorded firing
        rows = aio(store.fetch("alerts_list", project=PROJECT, state="firing", limit=10))
        assert sorted(r["rule"] for r in rows) == ["builtin:dlq_growth", "builtin:run_failed", "dlq-invoice-settle"]
        # a second failure of another run: run_failed and dlq_growth count it into their firing alerts (an update
        # every 10), the rule keeps firing: still one message
        _dead_lettered_failure(store, aio, clock, "inv-2")
        clock.advance(15)
        assert len(inbox.round()) == 1
    finally:
        inbox.close()


def test_a_rule_that_matches_later_joins_the_incident_without_a_message(store, clock, aio, pg_url):
    inbox = Inbox(store, aio)
    try:
        _dlq_rule(store, aio, "min_over_time(1m) > 0")
        run_id = _dead_lettered_failure(store, aio, clock, "inv-1")
        [msg] = inbox.round()
        assert msg["payload"]["rules"] == ["builtin:run_failed", "builtin:dlq_growth"]
        for _ in range(5):
            clock.advance(15)
            got = inbox.round()
        assert len(got) == 1, [m["payload"]["rule"] for m in got]          # the rule fired: no message of its own
        [(rules,)] = query(pg_url, "select rules from automation.alert_incidents where cause = $1", f"run:{run_id}")
        assert rules == ["builtin:run_failed", "builtin:dlq_growth", "dlq-invoice-settle"]
        assert query(pg_url, "select count(*) from automation.alerts where rule = 'dlq-invoice-settle' "
                             "and state = 'firing'") == [(1,)]
    finally:
        inbox.close()


def test_a_dlq_rule_names_the_dead_letters_behind_its_value(store, clock, aio):
    inbox = Inbox(store, aio)
    try:
        aio(rule_store.upsert_builtin(store, PROJECT, notify=None, escalate_to=None, severity="p2", window_s=600,
                                      update_every=10))     # built-ins routed nowhere: only the rule's message
        _dlq_rule(store, aio, "> 0")
        runs = [_dead_lettered_failure(store, aio, clock, f"inv-{i}") for i in range(7)]
        [msg] = inbox.round()
        p = msg["payload"]
        assert (p["rule"], p["value"]) == ("dlq-invoice-settle", 7.0)
        letters = p["dead_letters"]
        assert len(letters) == 5 and p["dead_letters_more"] == 2         # bounded: the newest five
        assert {d["run_id"] for d in letters} <= set(runs) and len({d["run_id"] for d in letters}) == 5
        assert all((d["workflow"], d["error_code"], d["error_type"], d["attempts"], d["failed_step"]) ==
                   ("wf_invoice_settle", "E_UPSTREAM_400", "permanent", 1, "settle") for d in letters)
        assert (p["workflow"], p["error_code"], p["attempts"]) == ("wf_invoice_settle", "E_UPSTREAM_400", 1)
        assert p["run_id"] in runs
        assert p["next_action"] == ("a44 automation dlq redrive q_invoice_settle --filter "
                                    f"\"error_code == 'E_UPSTREAM_400'\" --project {PROJECT}")
    finally:
        inbox.close()


def test_a_rule_on_partial_runs_names_the_runs_behind_its_value(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    api.reject = {BAD}
    ir = compile_yaml(tmp_path, YAML.format(base=serve(api.app()), on_failure="partial"))
    inbox = Inbox(store, aio)
    try:
        aio(rule_store.upsert_builtin(store, PROJECT, notify=None, escalate_to=None, severity="p2", window_s=600,
                                      update_every=10))     # built-ins routed nowhere: only the rule's message
        aio(rule_store.upsert(store, PROJECT, check_rule(
            name="partial-loads", metric="automation.runs", filter='workflow="wf_daily_load",state="partial"',
            condition="> 0", severity="p3", notify="squad-billing")))
        eng, run_id, run = aio(start(store, clock, ir, "2026-07-01", "2026-07-05"))
        assert run["state"] == "partial"
        [msg] = inbox.round()
        p = msg["payload"]
        assert (p["rule"], p["value"], p["run_id"], p["workflow"], p["state"]) == (
            "partial-loads", 1.0, run_id, "wf_daily_load", "partial")
        assert [r["run_id"] for r in p["runs"]] == [run_id] and p["causes"] == [f"run:{run_id}"]
        assert p["next_action"] == f"a44 automation replay {run_id} --failed-partitions --project {PROJECT}"
        aio(eng.registry.aclose())
    finally:
        inbox.close()
