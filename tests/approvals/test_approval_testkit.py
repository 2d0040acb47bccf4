"""The test kit runs an approval (§20, issue 28 "done when"): published from YAML with its `kind: approvers` group,
reminders at +24 h and +48 h and an escalation at +48 h enqueued at exactly those virtual instants, each once,
then two approvals end it approved, with two engines claiming side by side; the wall time of the whole run is printed (never asserted)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from anthares44.automation.runtime.notify import outbox

GROUPS = """
- kind: approvers
  name: finance-leads
  members: [alice, bob, carol]
- kind: approvers
  name: cfo
  members: [dave]
"""

WORKFLOW = """
name: refund
version: 1
steps:
  - id: request
    uses: pass
    timeout: 5s
  - id: cfo-approval
    approval:
      approvers: {groups: [finance-leads], min: 2}
      timeout: 72h
      remind: [24h, 48h]
      escalate: {after: 48h, to: {groups: [cfo]}}
      onTimeout: reject
      notify: squad-billing
  - id: pay
    uses: pass
    timeout: 5s
"""


def test_an_approval_with_reminders_at_24h_and_48h_on_virtual_time(a44_env):
    began = time.perf_counter()
    a44_env.publish(GROUPS)
    a44_env.publish(WORKFLOW)          # its groups are the project's published ones now (no A44260)
    a44_env.start_worker()              # two daemons claim side by side: still each message once
    run = a44_env.run("refund", {"amount": 10}, initiator="alice")
    assert run.state == "waiting"
    opened = a44_env.now
    idle = a44_env.advance("60h")       # through both reminders and the escalation: the run keeps waiting
    assert run.state == "waiting" and idle == opened + timedelta(hours=60)
    # keys approval:<run>:<epoch>:<step>:<which>, one row each however often the run was visited
    sent = {n["idempotency_key"].split(":", 4)[-1]: n for n in a44_env.notifications()}
    assert {k: v["created_at"] - opened for k, v in sent.items()} == {
        "request": timedelta(0), "remind:1": timedelta(hours=24), "remind:2": timedelta(hours=48),
        "escalation": timedelta(hours=48)}
    assert [v["kind"] for v in sent.values()] == ["firing", "update", "update", "escalation"]
    second = a44_env.call(outbox.get(a44_env.store, a44_env.project, sent["remind:2"]["id"]))["payload"]
    # escalated: dave is asked too; alice started the run (no allowSelf): never asked, no link
    assert set(second["deciders"]) == {"bob", "carol", "dave"}
    assert {link["person"] for link in second["links"]} == {"bob", "carol", "dave"}
    assert all(link["path"].startswith("/approvals/links/") for link in second["links"])
    assert a44_env.approve(run, "cfo-approval", "bob")["outcome"] == "recorded"
    assert a44_env.approve(run, "cfo-approval", "dave", comment="ok by me")["outcome"] == "approved"
    assert run.state == "succeeded"
    out = run.attempts("cfo-approval")[0]
    assert out["status"] == "succeeded"
    print(f"\nan approval with reminders at +24h and +48h virtual: {time.perf_counter() - began:.2f} s wall")


@pytest.mark.a44_env(public_url="https://a44.example.com/")
def test_with_a_public_url_each_message_carries_links_a_mail_reader_can_click(a44_env):
    """A44_PUBLIC_URL: every link of a message is also an absolute https URL under it (the path alone, the default,
    is not something a person can click in a mail); the URL decides like the path (same token)."""
    a44_env.publish(GROUPS)
    a44_env.publish(WORKFLOW)
    a44_env.start_worker()
    a44_env.run("refund", {"amount": 10}, initiator="alice")
    a44_env.run_until_idle()
    (request,) = [n for n in a44_env.notifications() if n["idempotency_key"].endswith(":request")]
    payload = a44_env.call(outbox.get(a44_env.store, a44_env.project, request["id"]))["payload"]
    assert {link["person"] for link in payload["links"]} >= {"bob", "carol"}
    for link in payload["links"]:
        assert link["url"] == "https://a44.example.com" + link["path"]


def test_a_bad_public_url_makes_no_link_to_anywhere_else():
    from anthares44.automation.runtime.approvals.links import url

    assert url("https://a44.example.com", "/approvals/links/t") == "https://a44.example.com/approvals/links/t"
    for bad in (None, "", "javascript:alert(1)", "ftp://a44.example.com", "https://a44.example.com/?x=1",
                "https://a44.example.com/#f", "https://"):
        assert url(bad, "/approvals/links/t") is None, bad
