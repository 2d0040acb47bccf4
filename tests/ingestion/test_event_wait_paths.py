"""Events reach the runs waiting for them through every ingestion path (§20, docs/waits.md "Event waits"): an
event published by REST (`POST /v1/automation/events`, as `a44 automation events publish` sends it) and a signed
webhook (its event `webhook.<trigger>`) each satisfy the correlated wait of a run, on a live server and the real
engine; an event of another correlation value satisfies nothing."""

from __future__ import annotations

import json

from anthares44.automation.app.publishing import publish
from tests.runtime.engine_support import Script, engine

from .support import P, bearer, request, signed_headers, write_project
from .test_api import token

WAITER = """\
name: waiter-{name}
version: 1
steps:
  - id: pay
    wait:
      event: {event}
      correlate: {{run: "input.invoiceId", event: "data.invoiceId"}}
      timeout: 1h
  - id: after
    uses: pass
    timeout: 2s
"""


def _project(root) -> list[str]:
    paths = write_project(root)
    (root / "workflows" / "waiter_bus.yaml").write_text(WAITER.format(name="bus", event="billing.paid"))
    (root / "workflows" / "waiter_hook.yaml").write_text(WAITER.format(name="hook", event="webhook.trg_hook"))
    return paths


async def _runs(store, invoice: str) -> list[str]:
    return [(await store.create_run(P, f"wf_waiter_{w}", {"invoiceId": invoice}, f"{w}-{invoice}")).run_id
            for w in ("bus", "hook")]


async def _drive(store):
    return await engine(store, Script()).drive()


async def _output(store, run_id: str):
    for a in await store.list_attempts(run_id):
        if a["step_id"] == "pay" and a["status"] == "succeeded":
            return store.load_result(a)
    return None


def test_a_rest_event_and_a_webhook_each_satisfy_the_waiting_run(live, tmp_path):
    report = live.call(publish, P, _project(tmp_path / "proj"))
    assert report.ok, [d.to_dict() for d in report.diagnostics]
    from anthares44.automation.runtime.ingestion.triggers import current_secret

    secret = live.call(current_secret, P, "trg_hook")["secret"]
    bus_run, hook_run = live.call(_runs, "inv_77")
    other_bus, other_hook = live.call(_runs, "inv_78")
    assert set(live.call(_drive).values()) == {"waiting"}
    ev = json.dumps({"type": "billing.paid", "data": {"invoiceId": "inv_77"}, "idempotency_key": "paid:77"}).encode()
    s, e, _ = request(live.port, "POST", "/v1/automation/events", ev, bearer(token(live)))
    assert s == 202
    body = json.dumps({"invoiceId": "inv_77"}).encode()
    s, hook, _ = request(live.port, "POST", f"/v1/{P}/trg_hook", body, signed_headers(secret, body, key="h-77"))
    assert s == 202
    done = live.call(_drive)
    assert done[bus_run] == done[hook_run] == "succeeded"
    assert live.call(_output, bus_run)["event"]["id"] == e["event_id"]
    hooked = live.call(_output, hook_run)["event"]
    assert hooked["type"] == "webhook.trg_hook" and hooked["data"] == {"invoiceId": "inv_77"}
    states = {r: live.run(live.store.get_run(r))["state"] for r in (other_bus, other_hook)}
    assert states == {other_bus: "waiting", other_hook: "waiting"}
