"""From a run's end to a person's inbox, every part real: the engine fails a run and drives a saga to
`compensation_failed`, dead letters pile up, the alert evaluator decides, and the notification deliverer signs and
sends to a loopback webhook receiver (which verifies the signature with the ingestion's own code) and a Slack-style
receiver. Each receiver gets exactly the specified messages, with the workflow, run, step, error, attempts and the
command to paste, and a second delivery round sends nothing again."""

from __future__ import annotations

import json
import random

from anthares44.automation.runtime.alerts import rules as rule_store
from anthares44.automation.runtime.alerts.evaluator import Evaluator
from anthares44.automation.runtime.notify import channels
from anthares44.automation.runtime.notify.delivery import Deliverer
from anthares44.automation.runtime.queues import deliver_envelope
from anthares44.automation.runtime.secrets.source import SecretSource
from tests.notify.conftest import FAST, SECRET
from tests.notify.receivers import HttpReceiver
from tests.runtime.engine_support import PROJECT, Script, engine, node, publish_and_run, workflow


def _received(receiver: HttpReceiver) -> list[dict]:
    return [json.loads(r["body"]) for r in receiver.requests]


def test_failed_compensation_failed_and_dlq_growth_reach_the_receivers(store, clock, aio):
    hook, slack = HttpReceiver(secret=SECRET), HttpReceiver()
    deliverer = Deliverer(store, SecretSource({"sec_hook": SECRET}, use_env=False), FAST, rng=random.Random(1))
    try:
        aio(channels.create(store, PROJECT, "squad-billing", "webhook", {"url": hook.hook, "secretRef": "sec_hook"}))
        aio(channels.create(store, PROJECT, "oncall", "slack", {"url": slack.hook}))
        aio(rule_store.upsert_builtin(store, PROJECT, notify="squad-billing", escalate_to="oncall", severity="p2",
                                      window_s=600, update_every=2))
        # a run that fails for good, a saga whose compensation fails, and two envelopes nobody can read
        failing = aio(publish_and_run(store, workflow([node("settle")], name="invoice_settle"), key="f1"))
        act = Script(plan={"settle": ["perm"], "refund": ["perm"]})
        undo = Script("undo", plan={"reserve": ["perm"] * 3})
        saga = aio(publish_and_run(store, workflow([node("reserve", compensate="undo"), node("refund")],
                                                   name="saga"), key="s1"))
        eng = engine(store, act, undo, clock=clock)
        for wait in (0, 5, 20, 60):
            clock.advance(wait)
            aio(eng.drive())
        for i in range(2):
            aio(deliver_envelope(store, PROJECT, "wf_invoice_settle", b"not json %d" % i))

        ev = Evaluator(store, holder="d1", interval_s=15)
        assert aio(ev.step()) is True
        sent = aio(deliverer.deliver_due())
        assert sent == 3

        got = _received(hook)
        assert all(r["verified"] for r in hook.requests)
        assert sorted((d["kind"], d["payload"]["rule"]) for d in got) == [
            ("firing", "builtin:compensation_failed"), ("firing", "builtin:dlq_growth"),
            ("firing", "builtin:run_failed")]
        by_rule = {d["payload"]["rule"]: d for d in got}
        failed = by_rule["builtin:run_failed"]["payload"]
        assert (failed["workflow"], failed["run_id"], failed["failed_step"], failed["error_code"],
                failed["attempts"]) == ("wf_invoice_settle", failing, "settle", "E_UPSTREAM_400", 1)
        assert failed["next_action"] == f"a44 automation replay {failing} --from-step settle --project {PROJECT}"
        comp = by_rule["builtin:compensation_failed"]["payload"]
        assert (comp["run_id"], comp["compensation_step"], comp["error_code"]) == (
            saga, "reserve", "E_COMPENSATION_FAILED")
        assert {d["severity"] for d in got} == {"p2"}              # the routing's severity
        assert comp["next_action"].startswith(f"a44 automation logs {saga}")
        dlq = by_rule["builtin:dlq_growth"]["payload"]
        assert (dlq["queue"], dlq["dlq_depth"]) == ("q_default", 2)
        assert dlq["next_action"].startswith("a44 automation dlq redrive q_default")
        keys = [r["headers"]["Idempotency-Key"] for r in hook.requests]
        assert len(set(keys)) == 3

        # two more dead letters: one update (every 2), nothing resent
        for i in range(2, 4):
            aio(deliver_envelope(store, PROJECT, "wf_invoice_settle", b"not json %d" % i))
        clock.advance(15)
        aio(ev.step())
        assert aio(deliverer.deliver_due()) == 1
        assert aio(deliverer.deliver_due()) == 0
        last = _received(hook)[-1]
        assert (last["kind"], last["payload"]["rule"], last["payload"]["dlq_depth"]) == ("update",
                                                                                          "builtin:dlq_growth", 4)
        assert len(hook.requests) == 4 and slack.requests == []

        # the window ends with the DLQ still full: the escalation goes to the Slack channel at p1, readable
        clock.advance(600)
        aio(ev.step())
        aio(deliverer.deliver_due())
        heads = sorted(json.loads(r["body"])["text"].split(" — ")[0] for r in slack.requests)
        assert heads == ["[P1] escalation: DLQ of q_default grew to 4",
                         "[P1] escalation: wf_invoice_settle run failed: E_UPSTREAM_400 at step settle",
                         "[P1] escalation: wf_saga run compensation_failed: E_COMPENSATION_FAILED at step refund"], heads
        texts = " ".join(json.dumps(json.loads(r["body"])["blocks"]) for r in slack.requests)
        assert f"a44 automation replay {failing} --from-step settle" in texts
        assert "a44 automation dlq redrive q_default" in texts
        assert len(hook.requests) == 4          # escalations go to the escalation channel only
    finally:
        aio(deliverer.close())
        hook.close()
        slack.close()
