"""Approvals over a real REST server on 127.0.0.1 (§20, docs/approvals.md): the person is the calling token's
name (`automation:approve` suffices, no write rights), the run's initiator is the token that started it, and the
refusals answer 403 / 404 / 409 / 400 in the error shape; one-click links: the GET is a confirm page that records
nothing, only the POST decides, once; an altered, forged, expired or reused link, another project's run and a huge
comment or form are refused with a 4xx page, never a 5xx."""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest

from anthares44.automation.runtime.approvals import links
from anthares44.automation.runtime.engine import Engine
from anthares44.automation.runtime.ingestion.tokens import create_token
from anthares44.automation.runtime.notify import outbox
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.approvals.support import audit, gated, groups
from tests.ingestion.support import LiveServer, bearer, request
from tests.runtime.engine_support import PROJECT, Script


@pytest.fixture
def live(pg_url, tmp_path):
    server = LiveServer(pg_url, results_dir=tmp_path / "results")
    try:
        yield server
        log = server.log_text()
        assert "Traceback" not in log and "E_INTERNAL" not in log, log[-4000:]
    finally:
        server.close()


def _tokens(live, project: str = PROJECT) -> dict[str, str]:
    scopes = {"alice": ["automation:approve"], "bob": ["automation:approve"], "mallory": ["automation:approve"],
              "carol": ["automation:write", "automation:approve"], "reader": ["automation:read"]}
    return {name: live.call(create_token, project, name, scope, timedelta(days=1)).token
            for name, scope in scopes.items()}


def _api(live, token: str, method: str, path: str, body: bytes = b""):
    status, doc, _ = request(live.port, method, "/v1/automation" + path, body, bearer(token))
    return status, doc


def _page(live, method: str, path: str, form: bytes = b""):
    headers = [("Content-Type", "application/x-www-form-urlencoded")] if method == "POST" else []
    status, text, _ = request(live.port, method, path, form, headers)
    return status, text if isinstance(text, str) else str(text)


async def _drive(store):
    eng = Engine(store, ConnectorRegistry(), worker_id="w1")
    eng.registry.register(Script())
    return await eng.drive()


async def _publish(store, ir):
    from anthares44.automation.compiler.ir import to_json

    await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))


async def _links(store, run_id: str) -> dict[str, str]:
    [n] = [n for n in reversed(await outbox.listing(store, PROJECT, None, 100))
           if n["idempotency_key"].startswith(f"approval:{run_id}:")]
    payload = (await outbox.get(store, PROJECT, n["id"]))["payload"]
    return {link["person"]: link["path"] for link in payload["links"]}


def _start(live, tokens) -> str:
    import json

    status, doc = _api(live, tokens["carol"], "POST", "/runs",
                       json.dumps({"workflow": "wf_t", "input": {}, "idempotency_key": secrets.token_hex(4)}).encode())
    assert status == 202, doc
    live.call(_drive)
    return doc["run_id"]


def test_decisions_over_rest_name_the_token_and_refuse_with_the_stable_codes(live):
    import json

    tokens = _tokens(live)
    live.call(groups, finance_leads=["alice", "bob", "carol"])
    live.call(_publish, gated(min=2))
    run_id = _start(live, tokens)

    def decide(who, decision="approve", comment=None):
        return _api(live, tokens[who], "POST", f"/runs/{run_id}/approvals/sign-off",
                    json.dumps({"decision": decision, "comment": comment}).encode())
    s, doc = decide("carol")                           # started the run: may not approve it
    assert (s, doc["error"]["code"]) == (403, "E_SELF_APPROVAL")
    s, doc = decide("mallory")
    assert (s, doc["error"]["code"]) == (403, "E_NOT_APPROVER")
    s, doc = decide("reader")                          # a read token may not decide at all (scope)
    assert s == 403
    s, doc = decide("alice", comment="x" * 5000)
    assert s == 400
    s, doc = _api(live, tokens["alice"], "POST", f"/runs/{run_id}/approvals/sign-off", b'{"decision": "maybe"}')
    assert s == 400
    s, doc = _api(live, tokens["alice"], "POST", "/runs/run_nope/approvals/sign-off", b'{"decision": "approve"}')
    assert (s, doc["error"]["code"]) == (404, "E_RUN_NOT_FOUND")
    s, doc = decide("alice", comment="fine")
    assert (s, doc["outcome"], doc["person"], doc["approvals"]) == (200, "recorded", "alice", 1)
    s, doc = decide("alice")
    assert (s, doc["outcome"]) == (200, "duplicate")
    s, doc = _api(live, tokens["bob"], "GET", "/approvals?mine=true")
    assert s == 200 and [a["run_id"] for a in doc["approvals"]] == [run_id]
    s, doc = _api(live, tokens["alice"], "GET", "/approvals?mine=true")
    assert s == 200 and doc["approvals"] == []
    s, doc = _api(live, tokens["reader"], "GET", f"/runs/{run_id}")
    assert s == 200 and doc["approvals"][0]["deciders"] == ["alice", "bob", "carol"]
    s, doc = decide("bob", "approve")
    assert (s, doc["outcome"]) == (200, "approved")
    s, doc = decide("carol", "reject")
    assert (s, doc["error"]["code"], doc["error"]["details"]["state"]) == (409, "E_APPROVAL_CLOSED", "satisfied")
    assert [r["person"] for r in live.call(audit, run_id)] == ["alice", "bob"]     # audit rows = accepted decisions


def test_another_projects_token_cannot_decide_the_run_and_no_token_is_named_local(live):
    import json

    tokens = _tokens(live)
    other = _tokens(live, "pj_other")
    live.call(groups, finance_leads=["alice"])
    live.call(groups, "pj_other", finance_leads=["alice"])
    live.call(_publish, gated())
    run_id = _start(live, tokens)
    s, doc = _api(live, other["alice"], "POST", f"/runs/{run_id}/approvals/sign-off",
                  json.dumps({"decision": "approve"}).encode())
    assert (s, doc["error"]["code"]) == (404, "E_RUN_NOT_FOUND")
    assert live.call(audit, run_id) == []
    from anthares44.automation.errors import A44Error

    with pytest.raises(A44Error, match="local:"):      # no token may pose as a local CLI user
        live.call(create_token, PROJECT, "local:alice", ["automation:approve"], timedelta(days=1))


def test_a_link_get_records_nothing_and_only_its_post_decides_once(live):
    tokens = _tokens(live)
    live.call(groups, finance_leads=["alice", "bob"])
    live.call(_publish, gated(min=2, notify="squad"))
    run_id = _start(live, tokens)
    paths = live.call(_links, run_id)
    assert set(paths) == {"alice", "bob"}
    for _ in range(3):                                 # a mail scanner fetching the link, three times
        s, page = _page(live, "GET", paths["alice"])
        assert s == 200 and "Confirm your decision" in page and "alice" in page
    assert live.call(audit, run_id) == []              # a GET of the link records 0 decisions
    s, page = _page(live, "POST", paths["alice"], b"decision=approve&comment=looks+right")
    assert s == 200 and "Decision recorded" in page
    s, page = _page(live, "POST", paths["alice"], b"decision=approve")     # replayed: single use
    assert s == 409 and "E_APPROVAL_LINK_USED" in page
    s, page = _page(live, "POST", paths["bob"], b"decision=reject&comment=no")
    assert s == 200 and "rejected" in page
    s, page = _page(live, "GET", paths["bob"])          # the request is closed: a page that offers nothing
    assert s in (200, 409) and "<form" not in page
    rows = live.call(audit, run_id)
    assert [(r["person"], r["decision"], r["via"], r["comment"]) for r in rows] == [
        ("alice", "approve", "link", "looks right"), ("bob", "reject", "link", "no")]


def test_altered_forged_expired_and_garbage_links_are_refused_never_a_5xx(live):
    tokens = _tokens(live)
    live.call(groups, finance_leads=["alice"])
    live.call(_publish, gated(notify="squad"))
    run_id = _start(live, tokens)
    good = live.call(_links, run_id)["alice"].removeprefix(links.PATH)
    payload, sig = good.split(".")
    key = live.call(links.key)
    from datetime import UTC, datetime

    soon = datetime.now(UTC) + timedelta(days=1)
    bad = {
        "altered": payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1] + "." + sig,
        "forged": links.sign_with(secrets.token_bytes(32), links.Link(PROJECT, run_id, 0, "sign-off", "alice", soon)),
        "another person": links.sign_with(secrets.token_bytes(32), links.Link(PROJECT, run_id, 0, "sign-off", "mallory", soon)),
        "huge": "a" * 100_000,
        "no dot": "abc",
        "bad base64": "!!!.???",
        "empty json": links._b64(b"{}") + "." + sig,
    }
    expired = links.sign_with(key, links.Link(PROJECT, run_id, 0, "sign-off", "alice", datetime.now(UTC) - timedelta(seconds=1)))
    other_project = links.sign_with(key, links.Link("pj_other", run_id, 0, "sign-off", "alice", soon))
    for what, token in bad.items():
        for method in ("GET", "POST"):
            s, page = _page(live, method, links.PATH + token, b"decision=approve")
            assert s in (403, 404, 414, 400), (what, method, s)
    for method in ("GET", "POST"):
        s, page = _page(live, method, links.PATH + expired, b"decision=approve")
        assert s == 410 and "E_APPROVAL_LINK_EXPIRED" in page
    s, page = _page(live, "POST", links.PATH + other_project, b"decision=approve")
    assert s == 404 and "E_RUN_NOT_FOUND" in page
    other_epoch = links.sign_with(key, links.Link(PROJECT, run_id, 7, "sign-off", "alice", soon))
    s, page = _page(live, "POST", links.PATH + other_epoch, b"decision=approve")   # not this attempt's request
    assert s == 404 and "E_APPROVAL_NOT_FOUND" in page
    s, page = _page(live, "POST", links.PATH + good, b"decision=approve&comment=" + b"x" * 20_000)
    assert s == 400 and "E_APPROVAL_INVALID" in page
    s, page = _page(live, "POST", links.PATH + good, b"decision=maybe")
    assert s == 400
    assert live.call(audit, run_id) == []
    s, page = _page(live, "POST", links.PATH + good, b"decision=approve")
    assert s == 200 and "approved" in page
