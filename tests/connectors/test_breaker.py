"""Circuit breakers (§14) shared through PostgreSQL: two registries with their own stores stand for two daemons;
a ManualClock drives the window, openFor and the doubling. The far side is a loopback server whose health the
test switches."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from aiohttp import web

from anthares44.automation.attempts import counts_against_budget
from anthares44.automation.compiler.retry_policy import Failure
from anthares44.automation.errors import E_CIRCUIT_OPEN, A44Error
from anthares44.automation.runtime.connector_services import connector_services
from anthares44.automation.runtime.store.core import Store
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry


def far_side(state: dict):
    async def handler(request):
        state["hits"] += 1
        await asyncio.sleep(state.get("delay", 0))
        if state["healthy"]:
            return web.json_response({"ok": True})
        return web.Response(status=503, text="down")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    return app


def decl(base: str, **cb):
    return {"con_erp": {"id": "con_erp", "type": "http", "baseUrl": base,
                        "circuitBreaker": {"errorRateThreshold": 0.5, "window": 10_000, "openFor": 30_000,
                                           "minRequests": 4, **cb}}}


@pytest.fixture
def daemons(pg_url, clock, serve, aio):
    """Two 'daemons': (registry, services) pairs on separate stores of the same database, one shared clock; the
    services are built the way the engine builds them."""
    state = {"hits": 0, "healthy": False}
    base = serve(far_side(state))
    async def pool():
        return await Store.connect(pg_url, clock=clock, min_size=1, max_size=4)

    pools = [aio(pool()) for _ in range(2)]
    regs = [ConnectorRegistry(decl(base), clock=clock) for _ in range(2)]
    yield state, list(zip(regs, [connector_services(p) for p in pools]))
    for r, p in zip(regs, pools):
        aio(r.aclose())
        aio(p.close())


def call(reg, services, make_ctx, step="s1"):
    # registry.invoke is what the interpreter does (engine/invoke.py -> registry.call): breaker included
    return reg.invoke("con_erp", {"path": "/x"}, make_ctx(step_id=step, services=services))


async def outcome(coro):
    try:
        await coro
        return "ok"
    except A44Error as err:
        return err


def test_opens_on_error_rate_then_one_probe_doubling_to_five_minutes_then_closes(daemons, clock, make_ctx, aio):
    state, [(ra, sa), (rb, sb)] = daemons
    # three failures: below minRequests, still closed
    for i in range(3):
        err = aio(outcome(call(ra, sa, make_ctx, f"a{i}")))
        assert err.code == "E_UPSTREAM_503"
    # the fourth failure (seen from the other daemon) reaches minRequests at 100 % errors: open
    assert aio(outcome(call(rb, sb, make_ctx, "b0"))).code == "E_UPSTREAM_503"
    assert state["hits"] == 4

    # open: both daemons fail at once, nothing reaches the far side, the wait is the time left
    for reg, svc in ((ra, sa), (rb, sb)):
        err = aio(outcome(call(reg, svc, make_ctx, "c")))
        assert err.code == E_CIRCUIT_OPEN and err.retryable
        assert err.details["retry_after_ms"] == 30_000
        assert not counts_against_budget("failed", err.code)        # the engine does not charge the budget
        assert Failure.of(err).retry_after_ms == 30_000
    assert state["hits"] == 4
    clock.advance(10)
    assert aio(outcome(call(rb, sb, make_ctx, "c"))).details["retry_after_ms"] == 20_000

    # each elapsed openFor: exactly one probe among concurrent callers of both daemons; it fails; twice as long
    state["delay"] = 0.05
    clock.advance(20)
    for expected_next in (60_000, 120_000, 240_000, 300_000, 300_000):
        hits = state["hits"]

        async def race():
            return await asyncio.gather(*(outcome(call(r, s, make_ctx, f"p{i}"))
                                          for i, (r, s) in enumerate([(ra, sa), (rb, sb)] * 3)))

        results = aio(race())
        assert state["hits"] == hits + 1, "exactly one probe reaches the far side"
        codes = sorted(r.code for r in results)
        assert codes.count("E_UPSTREAM_503") == 1 and codes.count(E_CIRCUIT_OPEN) == 5
        err = aio(outcome(call(ra, sa, make_ctx, "after")))
        assert err.code == E_CIRCUIT_OPEN and err.details["retry_after_ms"] == expected_next
        clock.advance(expected_next / 1000 - 1)
        assert aio(outcome(call(rb, sb, make_ctx, "early"))).code == E_CIRCUIT_OPEN   # not yet
        assert state["hits"] == hits + 1
        clock.advance(1)

    # the far side recovers: the probe succeeds, the breaker closes for everyone, old samples are forgotten
    state["healthy"] = True
    state["delay"] = 0
    assert aio(outcome(call(rb, sb, make_ctx, "probe-ok"))) == "ok"
    for i in range(5):
        assert aio(outcome(call(ra if i % 2 else rb, sa if i % 2 else sb, make_ctx, f"ok{i}"))) == "ok"


def test_window_slides_and_permanent_errors_do_not_count(daemons, clock, make_ctx, aio):
    state, [(ra, sa), (rb, sb)] = daemons
    for i in range(3):
        assert aio(outcome(call(ra, sa, make_ctx, f"a{i}"))).code == "E_UPSTREAM_503"
    clock.advance(11)              # those three leave the 10 s window
    state["healthy"] = True
    for i in range(3):
        assert aio(outcome(call(rb, sb, make_ctx, f"b{i}"))) == "ok"
    state["healthy"] = False
    # 1 failure of 4 in the window: 25 % < 50 %, stays closed
    assert aio(outcome(call(ra, sa, make_ctx, "c"))).code == "E_UPSTREAM_503"
    assert aio(outcome(call(ra, sa, make_ctx, "d"))).code == "E_UPSTREAM_503"      # 2 of 5: 40 %
    assert aio(outcome(call(ra, sa, make_ctx, "e"))).code == "E_UPSTREAM_503"      # 3 of 6: 50 %: opens
    assert aio(outcome(call(rb, sb, make_ctx, "f"))).code == E_CIRCUIT_OPEN


def test_a_vanished_prober_is_replaced_after_its_deadline(daemons, clock, pg_url, make_ctx, aio):
    state, [(ra, sa), (rb, sb)] = daemons
    for i in range(4):
        aio(outcome(call(ra, sa, make_ctx, f"a{i}")))
    clock.advance(30)

    async def claim_and_vanish():
        conn = await asyncpg.connect(pg_url)
        try:
            from datetime import timedelta

            from anthares44.automation.runtime.store.core import Session
            return await Session(conn).fetchval("breaker_claim_probe", project_id="pj_default", connector_id="con_erp",
                                                now=clock.now(), token="ghost",
                                                until=clock.now() + timedelta(seconds=15))
        finally:
            await conn.close()

    assert aio(claim_and_vanish()) == 30_000
    err = aio(outcome(call(rb, sb, make_ctx, "x")))
    assert err.code == E_CIRCUIT_OPEN and err.details["state"] == "half_open"
    clock.advance(15)
    state["healthy"] = True
    assert aio(outcome(call(rb, sb, make_ctx, "y"))) == "ok"     # took over the stale probe, closed it
    assert aio(outcome(call(ra, sa, make_ctx, "z"))) == "ok"
