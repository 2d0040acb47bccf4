"""storage/put|get on the local object store, bot/invoke against a loopback OpenAI-compatible server, and
queue/publish onto the ingestion bus with a step-derived idempotency key."""

from __future__ import annotations

import dataclasses
import json

import pytest
from aiohttp import web

from anthares44.automation.compiler.ir import ConnectorRef
from anthares44.automation.errors import E_BOT_INVALID_ANSWER, E_PARAMS_INVALID, E_STORAGE_NOT_FOUND, A44Error
from anthares44.automation.runtime.connector_services import connector_services
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from anthares44.automation.stdlib_connectors.storage import LocalObjectStore
from tests.runtime.engine_support import node, publish_and_run, run_row, workflow


# -- storage ------------------------------------------------------------------------------------------------------
def test_put_get_round_trip_under_the_project_prefix(tmp_path, make_ctx, aio):
    reg = ConnectorRegistry(storage=LocalObjectStore(tmp_path / "storage"))
    put = aio(reg.invoke("storage/put", {"key": "invoices/2026/inv_1.json", "body": {"total": 10}}, make_ctx()))
    assert put["key"] == "invoices/2026/inv_1.json" and put["size"] == len(b'{"total":10}')
    assert put["uri"] == "a44-storage://pj_default/invoices/2026/inv_1.json"
    assert (tmp_path / "storage/pj_default/objects/invoices/2026/inv_1.json").read_bytes() == b'{"total":10}'
    got = aio(reg.invoke("storage/get", {"key": "invoices/2026/inv_1.json"}, make_ctx()))
    assert got["json"] == {"total": 10} and got["sha256"] == put["sha256"]
    aio(reg.invoke("storage/put", {"key": "a.txt", "body": "héllo", "contentType": "text/plain"}, make_ctx()))
    assert aio(reg.invoke("storage/get", {"key": "a.txt"}, make_ctx()))["text"] == "héllo"
    # another project does not see it
    other = dataclasses.replace(make_ctx(), project_id="pj_other")
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("storage/get", {"key": "a.txt"}, other))
    assert exc.value.code == E_STORAGE_NOT_FOUND
    big = "x" * (300 * 1024)
    aio(reg.invoke("storage/put", {"key": "big.txt", "body": big, "contentType": "text/plain"}, make_ctx()))
    got = aio(reg.invoke("storage/get", {"key": "big.txt"}, make_ctx()))
    assert got["inline"] is False and "text" not in got and got["size"] == len(big)


@pytest.mark.parametrize("key", ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\\b", "a\x00b", "",
                                 "x" * 600, "a/..", "..", "é"])
def test_path_traversal_and_odd_keys_are_refused(tmp_path, make_ctx, aio, key):
    reg = ConnectorRegistry(storage=LocalObjectStore(tmp_path / "storage"))
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("storage/put", {"key": key, "body": "x"}, make_ctx()))
    assert exc.value.code == E_PARAMS_INVALID
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_a_symlink_out_of_the_prefix_is_refused(tmp_path, make_ctx, aio):
    root = tmp_path / "storage"
    (root / "pj_default" / "objects").mkdir(parents=True)
    (root / "pj_default" / "objects" / "out").symlink_to(tmp_path)
    reg = ConnectorRegistry(storage=LocalObjectStore(root))
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("storage/put", {"key": "out/escape.txt", "body": "x"}, make_ctx()))
    assert exc.value.code == E_PARAMS_INVALID and not (tmp_path / "escape.txt").exists()


# -- bot ----------------------------------------------------------------------------------------------------------
def llm_app(state: dict):
    async def completions(request):
        body = await request.json()
        state["requests"].append({"body": body, "auth": request.headers.get("Authorization")})
        answer = state["answers"].pop(0)
        if isinstance(answer, int):
            return web.json_response({"error": {"message": "busy"}}, status=answer, headers={"Retry-After": "2"})
        return web.json_response({"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": answer}}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    return app


@pytest.fixture
def llm(serve):
    state = {"requests": [], "answers": []}
    base = serve(llm_app(state))
    secrets = {"sec_llm": json.dumps({"baseUrl": base + "/v1", "apiKey": "sk-test-0123456789"})}
    return state, secrets


BOT = {"prompt": "Triage: {{ input.text }}", "schema": {"severity": "p1|p2|p3", "team": "string"},
       "maxOutputTokens": 64, "model": "triage-small", "secretRef": "sec_llm"}


def test_bot_answer_is_validated_and_sent_with_max_tokens(llm, make_ctx, aio):
    state, secrets = llm
    reg = ConnectorRegistry(secrets=secrets)
    state["answers"] = ['```json\n{"severity": "p2", "team": "payments", "extra": 1}\n```']
    ctx = dataclasses.replace(make_ctx(), secrets=None)
    out = aio(reg.invoke("bot/invoke", {**BOT, "prompt": "Triage: card declined"}, ctx))
    assert out == {"severity": "p2", "team": "payments"}
    req = state["requests"][0]
    assert req["auth"] == "Bearer sk-test-0123456789"
    assert req["body"]["max_tokens"] == 64 and req["body"]["model"] == "triage-small"
    assert req["body"]["messages"][-1] == {"role": "user", "content": "Triage: card declined"}
    assert '"severity": one of "p1", "p2", "p3"' in req["body"]["messages"][0]["content"]
    for bad, why in (('{"severity": "p9", "team": "x"}', "severity: expected one of p1, p2, p3"),
                     ('{"severity": "p1"}', "team: missing"), ('{"severity": "p1", "team": 3}', "team: expected string"),
                     ("I think it is p1", "not JSON"), ('["p1"]', "not a JSON object")):
        state["answers"] = [bad]
        with pytest.raises(A44Error) as exc:
            aio(reg.invoke("bot/invoke", BOT, ctx))
        assert exc.value.code == E_BOT_INVALID_ANSWER and exc.value.retryable and why in exc.value.message
    state["answers"] = [429]
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("bot/invoke", BOT, ctx))
    assert exc.value.code == "E_UPSTREAM_429" and exc.value.details["retry_after_ms"] == 2000
    aio(reg.aclose())


def test_bot_on_the_engine_retries_a_bad_answer_and_records_the_good_one(llm, store, clock, aio, monkeypatch):
    from anthares44.automation.runtime.engine import Engine

    state, secrets = llm
    state["answers"] = ['{"severity": "urgent", "team": "payments"}', '{"severity": "p1", "team": "payments"}']
    ref = ConnectorRef(uses="bot/invoke", kind="builtin", type="bot/invoke")
    n = node("triage", params={**BOT, "prompt": {"$tpl": "Triage: {{ input.text }}"}}, retry=(2, "fixed"),
             base_ms=0).model_copy(update={"connector": ref})
    run_id = aio(publish_and_run(store, workflow([n], name="bot"), input={"text": "card declined"}))
    reg = ConnectorRegistry(secrets=secrets)
    eng = Engine(store, reg, clock=clock)
    aio(eng.drive())
    run = aio(run_row(store, run_id))
    assert run["state"] == "succeeded" and run["result"] == {"triage": {"severity": "p1", "team": "payments"}}
    assert [r["body"]["messages"][-1]["content"] for r in state["requests"]] == ["Triage: card declined"] * 2
    attempts = aio(store.list_attempts(run_id))
    assert [(a["status"], a["error_code"]) for a in attempts] == [("failed", E_BOT_INVALID_ANSWER),
                                                                  ("succeeded", None)]
    aio(eng.drive())                    # the recorded answer stands: the model is not asked again
    assert len(state["requests"]) == 2
    aio(reg.aclose())


# -- queue/publish -------------------------------------------------------------------------------------------------
def test_publish_is_keyed_by_the_step_so_a_retry_publishes_nothing(store, make_ctx, aio):
    reg = ConnectorRegistry()
    params = {"type": "billing.invoice.finalized", "data": {"invoice": "inv_1"}, "partitionKey": "cust_1"}
    first = aio(reg.invoke("queue/publish", params, make_ctx(attempt=1, services=connector_services(store))))
    again = aio(reg.invoke("queue/publish", params, make_ctx(attempt=2, services=connector_services(store))))
    assert first["created"] is True and again["created"] is False
    assert first["eventId"] == again["eventId"] and first["idempotencyKey"] == "run_01TEST:charge:publish"
    other = aio(reg.invoke("queue/publish", params, make_ctx(step_id="other", services=connector_services(store))))
    assert other["created"] is True and other["eventId"] != first["eventId"]
    n = aio(store.pool.fetchval("select count(*) from automation.events"))
    assert n == 2
