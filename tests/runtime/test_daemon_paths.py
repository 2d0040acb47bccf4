"""The daemon's own paths, in process on the test database: the settings `serve` refuses before it connects, a
shutdown that cuts off a run still in flight after the grace (its lease is handed back, the run due again), a
cancel heard on channel a44_run_cancel, and the LISTEN connection killed by the server and opened again."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

import asyncpg
import pytest

from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.engine import WorkerSettings
from anthares44.automation.runtime.engine.cancels import cancel
from anthares44.automation.runtime.engine.daemon import Daemon
from anthares44.automation.settings import Settings
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry

from .engine_support import PROJECT, Script, node, workflow
from .test_one_clock import _until

LONG = timedelta(hours=6)        # every wall-time re-check: only NOTIFYs and finishing drivers wake the loop


def test_from_settings_takes_the_environment_then_the_overrides():
    s = WorkerSettings.from_settings(Settings(worker_id="env-worker", concurrency=3, lease_timeout="2m"),
                                     concurrency=None, grace=timedelta(seconds=2))
    assert (s.worker_id, s.concurrency, s.lease_timeout, s.grace) == \
        ("env-worker", 3, timedelta(minutes=2), timedelta(seconds=2))
    assert WorkerSettings.from_settings(Settings(concurrency=3), concurrency=5).concurrency == 5


@pytest.mark.parametrize("env, overrides, message", [
    (Settings(concurrency=0), {}, "concurrency must be at least 1"),
    (Settings(), {"concurrency": 0}, "concurrency must be at least 1"),
    (Settings(lease_timeout="100ms"), {}, "at least 300ms"),
])
def test_from_settings_refuses_what_serve_cannot_run_with(env, overrides, message):
    with pytest.raises(ValueError, match=message):
        WorkerSettings.from_settings(env, **overrides)


@contextlib.asynccontextmanager
async def _daemon(store, clock, script, **settings):
    registry = ConnectorRegistry()
    registry.register(script)
    settings = {"worker_id": "d1", "concurrency": 4, "lease_timeout": LONG, "schedules": False} | settings
    daemon = Daemon(WorkerSettings(**settings),
                    store=store, clock=clock, registry=registry)
    task = asyncio.create_task(daemon.serve())
    try:
        yield daemon
    finally:
        daemon.request_stop()
        await asyncio.wait_for(task, 30)


async def _blocked_run(store, script, key: str = "k1") -> str:
    ir = workflow([node("hold")], name="held")
    await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    run_id = (await store.create_run(PROJECT, ir.workflow_id, {}, key)).run_id
    await _until(lambda: _called(script, "hold"), "the daemon claims the run and calls its step")
    return run_id


async def _called(script, step: str):
    return script.called(step) > 0


def test_a_shutdown_past_the_grace_hands_the_cut_off_run_back(aio, store, clock):
    script = Script(plan={"hold": ["block:never"]})

    async def scenario():
        async with _daemon(store, clock, script, grace=timedelta(milliseconds=50)):
            run_id = await _blocked_run(store, script)
            held = await store.get_run(run_id)
            assert held["lease_owner"] == "d1"
        run = await store.get_run(run_id)
        assert run["lease_owner"] is None and run["state"] == "pending"
        assert run["next_wake_at"] is not None and run["next_wake_at"] <= clock.now()

    aio(scenario())


def test_a_cancel_notified_on_its_channel_stops_the_run_the_daemon_drives(aio, store, clock):
    script = Script(plan={"hold": ["block:go"]})

    async def scenario():
        async with _daemon(store, clock, script):
            run_id = await _blocked_run(store, script)
            asked = await cancel(store, PROJECT, run_id, by="alice", reason="wrong input")
            assert asked["outcome"] == "requested"
            script.events["go"].set()      # the step ends; the driver's next safe point sees the cancel
            done = await _until(lambda: _ended(store, run_id), "the daemon stops the cancelled run")
        assert done["state"] == "cancelled" and done["error_message"] == "cancelled by alice: wrong input"

    aio(scenario())


async def _ended(store, run_id):
    run = await store.get_run(run_id)
    return run if run["state"] in ("cancelled", "succeeded", "failed") else None


LISTENERS = "select pid from pg_stat_activity where query like 'LISTEN%a44_run%' order by pid"


def test_the_listener_killed_by_the_server_listens_again(aio, store, clock, pg_admin_url):
    script = Script()

    async def scenario():
        async with _daemon(store, clock, script):
            first = await _until(lambda: _listeners(pg_admin_url), "the daemon LISTENs")
            await _admin(pg_admin_url, "select pg_terminate_backend(pid) from pg_stat_activity where pid = any($1)",
                         first)
            again = await _until(lambda: _other_listener(pg_admin_url, first), "the daemon LISTENs again")
            assert set(again).isdisjoint(first)
            # the run's NOTIFY reaches the new LISTEN: with hours between the loop's re-checks nothing else
            # would wake it
            ir = workflow([node("once")], name="after")
            await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
            run_id = (await store.create_run(PROJECT, ir.workflow_id, {}, "k2")).run_id
            done = await _until(lambda: _ended(store, run_id), "the run created after the reconnect runs")
        assert done["state"] == "succeeded" and script.called("once") == 1

    aio(scenario())


async def _admin(url, sql, *args):
    conn = await asyncpg.connect(url)       # the superuser: may terminate the daemon's backend
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def _listeners(url):
    return [r[0] for r in await _admin(url, LISTENERS)]


async def _other_listener(url, old):
    now = await _listeners(url)
    return [p for p in now if p not in old]


def test_a_daemon_of_concurrency_one_drives_one_run_at_a_time(aio, store, clock):
    script = Script(plan={"first": ["block:first"], "second": ["block:second"]})

    async def scenario():
        ir1, ir2 = workflow([node("first")], name="one"), workflow([node("second")], name="two")
        for ir in (ir1, ir2):
            await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        async with _daemon(store, clock, script, concurrency=1):
            a = (await store.create_run(PROJECT, ir1.workflow_id, {}, "a")).run_id
            await _until(lambda: _called(script, "first"), "the daemon drives the first run")
            b = (await store.create_run(PROJECT, ir2.workflow_id, {}, "b")).run_id
            await asyncio.sleep(0.3)         # the second run's NOTIFY came; its slot is taken
            assert script.called("second") == 0 and (await store.get_run(b))["lease_owner"] is None
            script.events["first"].set()
            await _until(lambda: _called(script, "second"), "the freed slot takes the second run")
            script.events["second"].set()
            ends = [await _until(lambda r=r: _ended(store, r), "both runs end") for r in (a, b)]
        assert [e["state"] for e in ends] == ["succeeded", "succeeded"]

    aio(scenario())
