"""The REST client reads every answer through the model its endpoint declares for the status (app/contract/
endpoints.py): an answer that lacks what the model lists is refused as not an a44 answer (E_API) naming the
field, never turned into a half-filled report or a KeyError."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from anthares44.automation.app.remote import RemoteAutomation
from anthares44.automation.errors import E_API, A44Error
from tests.loopback import ThreadedServer


class Impostor(ThreadedServer):
    """Answers 202 on the run and event endpoints and 200 on publish, each missing a field the model lists."""

    def routes(self, app: web.Application) -> None:
        async def run(request):
            return web.json_response({"run_id": "run_1", "created": True, "workflow_id": "wf", "version": 1}, status=202)

        async def publish(request):
            return web.json_response({"project": "pj", "ok": True, "files": [], "diagnostics": [], "triggers": [],
                                      "stored_triggers": [], "workflows": [{"workflow_id": "wf", "version": 1}]})

        async def event(request):
            return web.json_response({"event_id": "evt_1", "created": True, "key_age_seconds": 0}, status=202)
        async def one_run(request):
            return web.json_response({"run_id": request.match_info["run_id"], "state": "running"})
        app.router.add_get("/v1/automation/runs/{run_id}", one_run)
        app.router.add_post("/v1/automation/runs", run)
        app.router.add_post("/v1/automation/publish", publish)
        app.router.add_post("/v1/automation/events", event)


@pytest.fixture
def impostor():
    server = Impostor()
    yield server
    server.close()


def _refusal(impostor, call) -> A44Error:
    async def main():
        async with RemoteAutomation(impostor.url, "a44_pat_x", "pj") as auto:
            return await call(auto)
    with pytest.raises(A44Error) as err:
        asyncio.run(main())
    assert err.value.code == E_API
    return err.value


def test_a_run_answer_without_its_fields_is_not_an_a44_answer(impostor):
    err = _refusal(impostor, lambda auto: auto.run("wf", {}, "k-1"))
    assert "POST /v1/automation/runs" in err.message and "RunHandle" in err.message
    assert "key_age_seconds" in err.message


def test_a_publish_answer_without_its_fields_is_not_an_a44_answer(impostor, tmp_path):
    (tmp_path / "wf.yaml").write_text("workflow: {}\n")
    err = _refusal(impostor, lambda auto: auto.publish([str(tmp_path / "wf.yaml")]))
    assert "PublishReport" in err.message and "workflows.0.sha256" in err.message


def test_an_event_answer_without_its_fields_is_not_an_a44_answer(impostor):
    err = _refusal(impostor, lambda auto: auto.ingestion().publish_event("order.paid", {}, "k-1"))
    assert "EventResult" in err.message and "type" in err.message


def test_a_document_answer_without_its_fields_is_not_an_a44_answer(impostor):
    err = _refusal(impostor, lambda auto: auto.get_run("run_1"))
    assert "GET /v1/automation/runs/run_1" in err.message and "not a Run " in err.message
    assert "workflow_id" in err.message
