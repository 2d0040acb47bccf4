"""Helpers of the partition tests: a workflow compiled from YAML by the real compiler, and a loopback "daily
data" API (aiohttp on 127.0.0.1) that counts calls per partition and answers 422 or hangs for the days told."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from pathlib import Path

from aiohttp import web

from anthares44.automation.compiler.ir import to_json
from anthares44.automation.compiler.lint import lint_paths
from tests.loopback import ThreadedServer
from tests.runtime.engine_support import engine

PROJECT = "pj_default"


def compile_yaml(tmp_path: Path, text: str, name: str = "wf.yaml"):
    """The IR of the one workflow in `text` (fails the test on any diagnostic error)."""
    path = tmp_path / name
    path.write_text(text)
    res = lint_paths([str(path)], lower=True)
    errors = [d for d in res.diagnostics if d.severity.name == "ERROR"]
    assert not errors, errors
    (ir,) = [v for k, v in res.irs.items() if k.startswith("wf_")]
    return ir


async def publish(store, ir) -> None:
    await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))


class DailyApi:
    """GET /day/{day}: 200 `{"day": .., "rows": {"in": 10, "out": 10, "error": 0}}`; a day in `reject` answers 422
    (permanent), a day in `hang` sleeps past any step timeout. `calls` counts requests per day."""

    def __init__(self):
        self.calls: Counter[str] = Counter()
        self.keys: dict[str, set[str]] = {}
        self.reject: set[str] = set()
        self.hang: set[str] = set()
        self.flaky: set[str] = set()        # answer 503 to the first call only
        self.empty: set[str] = set()        # a day with no rows (`rows.in` 0): an `expect:` catches it
        self.in_flight = 0
        self.max_in_flight = 0

    def app(self) -> web.Application:
        app = web.Application()
        self.routes(app)
        return app

    def routes(self, app: web.Application) -> None:
        async def day(request: web.Request):
            d = request.match_info["day"]
            self.calls[d] += 1
            self.keys.setdefault(d, set()).add(request.headers.get("Idempotency-Key", ""))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await asyncio.sleep(0.01)
                if d in self.hang:
                    await asyncio.sleep(30)
                if d in self.flaky and self.calls[d] == 1:
                    return web.json_response({"error": "busy"}, status=503)
                if d in self.reject:
                    return web.json_response({"error": "schema changed"}, status=422)
                n = 0 if d in self.empty else 10
                return web.json_response({"day": d, "rows": {"in": n, "out": n, "error": 0}})
            finally:
                self.in_flight -= 1

        app.router.add_get("/day/{day}", day)


class ThreadedDailyApi(DailyApi, ThreadedServer):
    """The same API on its own thread, for tests whose daemons and CLI are subprocesses."""

    def __init__(self):
        DailyApi.__init__(self)
        ThreadedServer.__init__(self)


def daily_yaml(base: str, *, on_failure: str = "partial", concurrency: int = 4, retries: int = 1) -> str:
    return f"""\
name: daily-load
version: 1
steps:
  - id: load
    uses: http
    timeout: 500ms
    retry: {{max: {retries}, strategy: fixed, base: 10ms}}
    url: "{base}/day/{{{{ partition }}}}"
    rows: {{in: "result.json.rows.in", out: "result.json.rows.out", error: "result.json.rows.error"}}
    partitions:
      range: {{from: "input.from", to: "input.to", every: 1d}}
      concurrency: {concurrency}
    onPartitionFailure: {on_failure}
  - id: report
    uses: pass
    timeout: 1s
"""


def days(n: int) -> list[str]:
    return [f"2026-07-{d:02d}" for d in range(1, n + 1)]


async def start(store, clock, ir, first: str, last: str):
    await publish(store, ir)
    run_id = (await store.create_run(PROJECT, ir.workflow_id, {"from": first, "to": last}, "k1")).run_id
    eng = engine(store, clock=clock)
    return eng, run_id, await drive_until_final(eng, clock, store, run_id)


async def drive_until_final(eng, clock, store, run_id, rounds: int = 20) -> dict:
    for _ in range(rounds):
        await eng.drive()
        run = await store.get_run(run_id)
        if run["state"] in ("succeeded", "partial", "failed"):
            return run
        clock.advance(timedelta(seconds=1))
    raise AssertionError(f"run {run_id} still {run['state']}")


async def partitions_of(store, run_id):
    return await store.fetch("partition_list", project=PROJECT, run_id=run_id, workflow=None, state=None,
                             partition=None, step=None, limit=100)
