"""Loopback stand-ins for the manual's `api` (tenants, databases) and the modules the code-workflow tests
publish: the manual's tenant-onboard example written as is, plus a tiny `api` client calling the stand-in."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path

from aiohttp import web

from anthares44.automation.app.automation import Automation
from tests.loopback import ThreadedServer


async def published_code(store, tmp_path: Path, filename: str, source: str) -> Automation:
    """An `Automation` on `store` after publishing the code workflow `source`, written to tmp_path/filename."""
    path = tmp_path / filename
    path.write_text(source)
    auto = Automation(store)
    report = await auto.publish([str(path)])
    assert report.ok, report
    return auto

ONBOARD = '''from anthares44.automation import workflow, step

import api


@workflow("tenant-onboard", version=4)
async def onboard(ctx, input):
    tenant = await step.run(
        "create-tenant", timeout="10s",
        fn=lambda: api.tenants.create(name=input["name"],
                                      request_id=ctx.idempotency_key),
    )

    await step.run(
        "provision-db", timeout="120s",
        retry={"max": 4, "strategy": "exponential-jitter"},
        compensate=lambda: api.databases.drop(tenant["db_id"]),
        fn=lambda: api.databases.create(tenant_id=tenant["id"]),
    )

    await step.sleep("cooldown", "30s")
    return {"tenant_id": tenant["id"], "at": ctx.now()}
'''

API = '''"""A tiny client of the loopback stand-in (its address in $ONBOARD_API, read at call time)."""
import os

import aiohttp


async def _post(path, body, key=None):
    headers = {"Idempotency-Key": key} if key else {}
    async with aiohttp.ClientSession() as s:
        async with s.post(os.environ["ONBOARD_API"] + path, json=body, headers=headers) as r:
            if r.status >= 400:
                raise RuntimeError(f"{path} answered {r.status}")
            return await r.json()


class _Tenants:
    def create(self, name, request_id):
        return _post("/tenants", {"name": name}, request_id)


class _Databases:
    def create(self, tenant_id):
        return _post("/databases", {"tenant_id": tenant_id})

    def drop(self, db_id):
        return _post("/databases/drop", {"db_id": db_id})


tenants = _Tenants()
databases = _Databases()
'''


def write_modules(directory: Path, onboard: str = ONBOARD) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "api.py").write_text(API)
    path = directory / "onboard.py"
    path.write_text(onboard)
    return path


class StandIn(ThreadedServer):
    """POST /tenants, /databases, /databases/drop. `db_mode`: ok | fail (400) | hold (until release())."""

    def __init__(self, db_mode: str = "ok"):
        self.db_mode = db_mode
        self.calls: Counter[str] = Counter()
        self.keys: list[str] = []
        self.held = threading.Event()
        self._go = threading.Event()
        super().__init__()

    def routes(self, app):
        app.router.add_post("/tenants", self._tenants)
        app.router.add_post("/databases", self._databases)
        app.router.add_post("/databases/drop", self._drop)

    async def _tenants(self, request):
        self.calls["create-tenant"] += 1
        self.keys.append(request.headers.get("Idempotency-Key", ""))
        body = await request.json()
        return web.json_response({"id": f"t_{body['name']}", "db_id": f"db_{body['name']}"})

    async def _databases(self, request):
        self.calls["provision-db"] += 1
        if self.db_mode == "fail":
            return web.json_response({"error": "bad"}, status=400)
        if self.db_mode == "hold":
            self.held.set()
            while not self._go.is_set():
                await asyncio.sleep(0.02)
        return web.json_response({"db": "ready"})

    async def _drop(self, request):
        self.calls["drop-db"] += 1
        return web.json_response({"dropped": (await request.json())["db_id"]})

    def release(self):
        self._go.set()
