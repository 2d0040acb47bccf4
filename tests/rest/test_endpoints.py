"""Every endpoint added for REST parity, on a real HTTP server on 127.0.0.1 over real PostgreSQL: the CLI verb's
document as the answer, scope refusals (read < write < admin), and bodies refused as 400 E_INVALID_ARGUMENT."""

from __future__ import annotations

from anthares44.automation.runtime import queues as rq
from tests.ingestion.support import P
from tests.runtime.test_api import finish_run

from .support import api  # noqa: F401 - the fixture

SCHEDULE = """\
- id: trg_nightly
  type: schedule
  cron: "0 2 * * *"
  tz: UTC
  workflow: wf_hooked
"""


def _failed_run(api) -> str:
    s, doc = api("POST", "/runs", {"workflow": "wf_hooked", "input": {}, "idempotency_key": "k-1"}, as_="write")
    assert s == 202, doc
    api.live.call(finish_run, doc["run_id"], "failed", failed_step="only", error_code="E_UPSTREAM_400")
    return doc["run_id"]


def test_replay_dry_run_then_replay_and_resolve_refusals(api):
    run_id = _failed_run(api)
    s, plan = api("POST", "/replay", {"run_ids": [run_id], "from_step": "only", "dry_run": True}, as_="write")
    assert s == 200 and plan["matched"] == 1 and plan["perRun"]["replayed"] == ["only"], plan
    assert api("GET", f"/runs/{run_id}", as_="read")[1]["state"] == "failed"      # a dry run changes nothing
    s, done = api("POST", "/replay", {"state": "failed", "since": "1h", "from_step": "only"}, as_="write")
    assert s == 200 and done["replayed"] == 1 and done["requestId"], done
    assert api("GET", f"/runs/{run_id}", as_="read")[1]["state"] == "pending"
    s, doc = api("POST", "/replay", {"from_step": "only"}, as_="write")            # no selection: the verb's error
    assert s == 400 and doc["error"]["code"] == "E_INVALID_ARGUMENT"
    assert api("POST", "/replay", {"run_ids": [run_id], "from_step": "only"}, as_="read")[0] == 403
    s, doc = api("POST", f"/runs/{run_id}/resolve", {"step": "only", "outcome": "maybe"}, as_="write")
    assert s == 400 and doc["error"]["code"] == "E_INVALID_ARGUMENT" and "outcome" in doc["error"]["message"]
    s, doc = api("POST", f"/runs/{run_id}/resolve", {"step": "only", "outcome": "succeeded"}, as_="write")
    assert 400 <= s < 500 and doc["error"]["code"] != "E_INTERNAL", doc    # not parked on that step
    s, doc = api("POST", "/runs/run_nope/resolve", {"step": "only", "outcome": "failed"}, as_="write")
    assert s == 404 and doc["error"]["code"] == "E_RUN_NOT_FOUND"


def test_queues_and_dead_letters(api):
    api.live.call(rq.deliver_envelope, P, "wf_hooked", b'{"broken')
    s, doc = api("GET", "/queues", as_="read")
    assert s == 200 and any(q["queue"] == "q_default" and q["dlq_depth"] == 1 for q in doc["queues"]), doc
    s, doc = api("GET", "/dead-letters?limit=5", as_="read")
    assert s == 200 and [d["error_code"] for d in doc["dead_letters"]] == ["E_ENVELOPE_INVALID"]
    dl = doc["dead_letters"][0]["dead_letter_id"]
    s, doc = api("GET", f"/dead-letters/{dl}?with_attempts=true", as_="read")
    assert s == 200 and doc["envelope"] == '{"broken' and doc["created_at"].endswith("Z")
    s, doc = api("GET", "/queues/q_default/dead-letters/stats?since=24h", as_="read")
    assert s == 200 and doc["total"] == 1 and doc["by_error_code"][0]["error_code"] == "E_ENVELOPE_INVALID"
    s, doc = api("POST", "/queues/q_default/dead-letters/redrive",
                 {"filter": "error_code == 'E_ENVELOPE_INVALID'", "dry_run": True}, as_="write")
    assert s == 200 and doc["dry_run"] and doc["matched"] == 1 and doc["redriven"] == 0, doc
    s, doc = api("POST", "/queues/q_default/dead-letters/redrive", {"filter": "error_code =="}, as_="write")
    assert s == 400 and doc["error"]["code"] == "E_DLQ_FILTER"
    s, doc = api("POST", "/queues/q_default/dead-letters/redrive", {"max": -1}, as_="write")
    assert s == 400 and doc["error"]["code"] == "E_INVALID_ARGUMENT"
    assert api("GET", "/dead-letters/dlq_nope", as_="read")[0] == 404
    assert api("POST", "/queues/q_default/dead-letters/redrive", {}, as_="read")[0] == 403


def test_tokens_and_webhook_secrets_need_the_admin_scope(api):
    for who in ("read", "write"):
        s, doc = api("GET", "/tokens", as_=who)
        assert s == 403 and "automation:admin" in doc["error"]["message"], doc
        assert api("POST", "/webhooks/trg_hook/rotate", as_=who)[0] == 403
    s, doc = api("POST", "/tokens", {"name": "ci", "scopes": ["automation:read"], "expires": "2h"})
    assert s == 201 and doc["token"].startswith("a44_pat_") and doc["expires_at"].endswith("Z"), doc
    s, listed = api("GET", "/tokens")
    assert s == 200 and "ci" in [t["name"] for t in listed["tokens"]]
    assert all("token" not in t for t in listed["tokens"])                  # never the token itself
    s, _ = api("DELETE", f"/tokens/{doc['token_id']}")
    assert s == 200 and api("DELETE", f"/tokens/{doc['token_id']}")[0] == 404
    s, doc = api("POST", "/tokens", {"name": "x", "scopes": ["automation:root"]})
    assert s == 400 and doc["error"]["code"] == "E_INVALID_ARGUMENT"
    s, doc = api("POST", "/webhooks/trg_hook/rotate")
    assert s == 200 and doc["trigger_id"] == "trg_hook" and doc["secret"] and doc["previous_valid_until"]
    s, doc = api("POST", "/webhooks/trg_nope/secret")
    assert s == 404 and doc["error"]["code"] == "E_TRIGGER_NOT_FOUND"


async def create_run_elsewhere(store):
    import tempfile

    from anthares44.automation.app.automation import Automation
    from tests.ingestion.support import write_project

    with tempfile.TemporaryDirectory() as tmp:
        auto = Automation(store, "pj_other")
        assert (await auto.publish(write_project(__import__("pathlib").Path(tmp)))).ok
        await auto.run("wf_hooked", {}, "k-other")


def test_connectors_metrics_and_schedule_preview(api):
    s, doc = api("GET", "/connectors", as_="read")
    assert s == 200 and "http" in [c["uses"] for c in doc["connectors"]]
    assert api("POST", "/runs", {"workflow": "wf_hooked", "idempotency_key": "k-m"}, as_="write")[0] == 202
    api.live.call(create_run_elsewhere)
    s, doc = api("GET", "/metrics?name=automation_queue", as_="read")
    assert s == 200 and doc["metrics"] and all(m["name"].startswith("automation_queue") for m in doc["metrics"])
    assert {m["labels"]["project"] for m in doc["metrics"]} == {P}            # not another project's queues
    s, doc = api("POST", "/schedules/preview", {"files": {"triggers/nightly.yaml": SCHEDULE},
                                                "from": "2026-07-01T00:00:00Z", "to": "2026-07-03T00:00:00Z"},
                 as_="read")
    assert s == 200 and len(doc["triggers"][0]["firings"]) == 2, doc
    s, doc = api("POST", "/schedules/preview", {"files": {"t.yaml": "- id: [oops"}, "from": "x", "to": "y"},
                 as_="read")
    assert s == 422 and doc["diagnostics"] and doc["diagnostics"][0]["file"] == "t.yaml", doc


def test_alert_rules_alerts_channels_and_notifications(api):
    s, doc = api("PUT", "/alert-rules/dlq-growing", {"metric": "automation.dlq_depth", "condition": "> 100"},
                 as_="write")
    assert s == 200 and doc["outcome"] == "created" and doc["name"] == "dlq-growing", doc
    assert api("GET", "/alert-rules", as_="read")[1]["rules"][0]["name"] == "dlq-growing"
    assert api("GET", "/alert-rules/dlq-growing", as_="read")[1]["condition"] == "> 100"
    s, doc = api("POST", "/alert-rules/dlq-growing/test", as_="read")
    assert s == 200 and doc["firing"] is False
    s, doc = api("PUT", "/builtin-alerts", {"severity": "p1"}, as_="write")
    assert s == 200 and doc["severity"] == "p1"
    assert api("GET", "/alerts?limit=5", as_="read") == (200, {"alerts": []})
    assert api("DELETE", "/alert-rules/dlq-growing", as_="write")[0] == 200
    assert api("GET", "/alert-rules/dlq-growing", as_="read")[0] == 404
    s, doc = api("PUT", "/channels/squad", {"type": "slack", "config": {"url": "http://127.0.0.1:9/hook"}},
                 as_="write")
    assert s == 200 and doc["kind"] == "slack", doc
    assert [c["name"] for c in api("GET", "/channels", as_="read")[1]["channels"]] == ["squad"]
    assert api("GET", "/channels/squad", as_="read")[1]["name"] == "squad"
    s, doc = api("PUT", "/channels/bad", {"type": "pager", "config": {}}, as_="write")
    assert s == 400 and doc["error"]["code"] == "E_INVALID_ARGUMENT"
    assert api("GET", "/notifications", as_="read") == (200, {"notifications": []})
    assert api("GET", "/notifications/42", as_="read")[0] == 404
    assert api("DELETE", "/channels/squad", as_="write")[0] == 200
    assert api("PUT", "/channels/squad", {"type": "slack", "config": {}}, as_="read")[0] == 403


def test_bodies_are_validated_before_anything_runs(api):
    for path, body in (("/replay", {"run_ids": "run_x", "from_step": "a"}), ("/replay", {"surprise": 1}),
                       ("/replay", {"run_ids": ["run_x"], "from_step": "a", "dry_run": "yes"}),
                       ("/runs/run_x/resolve", []), ("/queues/q_default/dead-letters/redrive", {"rate": 5})):
        s, doc = api("POST", path, body, as_="write")
        assert s == 400 and doc["error"]["code"] == "E_INVALID_ARGUMENT", (path, body, doc)
        assert "hint" in doc["error"] or path == "/runs/run_x/resolve"
    s, doc = api("POST", "/replay", raw=b"{not json", as_="write")
    assert s == 400 and doc["error"]["code"] == "E_INVALID_ARGUMENT"


def test_every_route_refuses_a_token_below_its_scope(api):
    """From the route table: each route answers 403 to the scope just below its own, before anything runs."""
    from anthares44.automation.http.openapi import ROUTES

    below = {"automation:write": "read", "automation:admin": "write"}
    checked = 0
    for r in ROUTES:
        if r.scope in below:
            path = r.path.removeprefix("/v1/automation").replace("{notification_id}", "1").replace("{version}", "1")
            path = path.replace("{", "").replace("}", "")          # any id: the scope is checked first
            s, doc = api(r.method, path, {}, as_=below[r.scope])
            assert s == 403 and doc["error"]["code"] == "E_FORBIDDEN" and r.scope in doc["error"]["message"], r
            checked += 1
    assert checked >= 19
