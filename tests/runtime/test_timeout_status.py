"""An attempt that runs past its step timeout is recorded `timeout` (docs/states.md "Attempt statuses"), whoever
notices first: the interpreter's timer, the http connector's own deadline (it raises E_STEP_TIMEOUT with the time
it was given, before the interpreter's timer fires), or a code workflow's step body whose client raises
E_STEP_TIMEOUT. The partition row and the run say `timeout` too."""

from __future__ import annotations

import asyncio

from aiohttp import web

from tests.code.support import published_code
from tests.connectors.conftest import serve  # noqa: F401  (the loopback aiohttp server fixture)
from tests.partitions.support import compile_yaml, publish
from tests.runtime.engine_support import PROJECT, engine


def _slow_app() -> web.Application:
    async def slow(request):
        await asyncio.sleep(5)
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/slow", slow)
    return app


YAML = """\
name: slow-export
version: 1
steps:
  - id: load
    uses: http
    timeout: 300ms
    url: "{base}/slow"
"""


def test_an_http_step_past_its_timeout_is_recorded_timeout(store, clock, aio, serve, tmp_path):
    base = serve(_slow_app())
    ir = compile_yaml(tmp_path, YAML.format(base=base))

    async def body():
        await publish(store, ir)
        run_id = (await store.create_run(PROJECT, ir.workflow_id, {}, "k1")).run_id
        eng = engine(store, clock=clock)
        await eng.drive()
        [a] = await store.list_attempts(run_id)
        assert (a["step_id"], a["status"], a["error_code"]) == ("load", "timeout", "E_STEP_TIMEOUT")
        run = await store.get_run(run_id)
        assert (run["state"], run["error_code"]) == ("failed", "E_STEP_TIMEOUT")
        await eng.registry.aclose()
    aio(body())


CODE = '''from anthares44.automation import workflow, step
from anthares44.automation.errors import A44Error


async def export():
    raise A44Error("E_STEP_TIMEOUT", "GET /export did not finish within 0.200 s")


@workflow("code-slow", version=1)
async def slow(ctx, input):
    await step.run("export", timeout="1s", fn=export)
'''


def test_a_code_step_whose_client_times_out_is_recorded_timeout(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "code_slow.py", CODE)
        run_id = (await auto.run("code-slow", {}, "k1")).run_id
        await engine(store, clock=clock).drive()
        [a] = [a for a in await store.list_attempts(run_id) if a["step_id"] == "export"]
        assert (a["status"], a["error_code"]) == ("timeout", "E_STEP_TIMEOUT")
    aio(body())
