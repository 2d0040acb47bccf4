"""The upstream 429 pause (§22, docs/flow.md) through the engine: a real aiohttp far side on its own thread
(tests/loopback.py) answers, the engine runs on a VirtualClock, and the far side records the virtual instant of
every call it gets, so "no call for 30 s" is counted in the clock's time, not the machine's.

Issue 30's bar: an upstream answers 429 with `Retry-After: 30` to the first call while N runs are queued on it:
no call reaches it for the next 30 s, no retry budget is used, N of N complete after. N = 100 here (CI);
`A44_SLOW=1` runs the issue's 500.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from aiohttp import web

from anthares44.automation.app.metrics import collect
from anthares44.automation.attempts import counts_against_budget
from anthares44.automation.compiler.ir import ConnectorRef
from anthares44.automation.errors import E_FLOW_KEY_NOT_FOUND, E_FLOW_PAUSE_INVALID, E_UPSTREAM_429, A44Error
from anthares44.automation.runtime.connector_services import StorePauses
from anthares44.automation.runtime.engine import Engine
from anthares44.automation.runtime.flow_pauses import list_paused, pause_key, resume_key
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.cli_support import run_cli
from tests.loopback import ThreadedServer
from tests.runtime.engine_support import PROJECT, node, publish_and_run, run_row, workflow

N = 500 if os.environ.get("A44_SLOW") == "1" else 100
HTTP = ConnectorRef(uses="http", kind="builtin", type="http")


class FarSide(ThreadedServer):
    """Answers `answers` in turn (status, headers), then 200; records the clock's instant of every call."""

    def __init__(self, clock, answers: list[tuple[int, dict[str, str]]]):
        self.clock = clock
        self.answers = list(answers)
        self.calls: list = []
        super().__init__()

    def routes(self, app: web.Application) -> None:
        async def handler(request):
            self.calls.append(self.clock.now())
            if self.answers:
                status, headers = self.answers.pop(0)
                return web.Response(status=status, text="slow down", headers=headers)
            return web.json_response({"ok": True})

        app.router.add_route("*", "/{tail:.*}", handler)


@pytest.fixture
def far_side(clock):
    servers: list[FarSide] = []

    def make(answers):
        servers.append(FarSide(clock, answers))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def http_workflow(url: str, name: str = "flow", **params):
    # retry `none`: any attempt that used budget would end its run failed
    step = node("call", params={"url": url, **params}, retry=(0, "none"))
    return workflow([step.model_copy(update={"connector": HTTP})], name=name)


async def queue_runs(store, ir, n: int) -> list[str]:
    return [await publish_and_run(store, ir, key=f"k{i}") for i in range(n)]


def test_a_429_pauses_the_key_for_every_queued_run_without_using_retry_budget(store, clock, far_side, aio):
    side = far_side([(429, {"Retry-After": "30"})])
    run_ids = aio(queue_runs(store, http_workflow(side.url + "/charge"), N))
    reg = ConnectorRegistry()
    eng = Engine(store, reg, clock=clock, concurrency=16)
    try:
        t0 = clock.now()
        aio(eng.run_once(limit=1))                       # the first call: 429, Retry-After: 30
        assert side.calls == [t0]
        aio(eng.drive())                                 # every other run: refused, released until t0 + 30 s
        for _ in range(29):                              # each second of the pause: nothing reaches the far side
            clock.advance(1)
            aio(eng.drive())
        assert side.calls == [t0]
        waiting = aio(run_row(store, run_ids[-1]))
        assert waiting["state"] == "waiting" and waiting["next_wake_at"] == t0 + timedelta(seconds=30)
        last = aio(store.list_attempts(run_ids[-1]))[-1]
        assert last["error_code"] == E_UPSTREAM_429     # the run says on what it waits, and until when
        assert f"flow key http:{PROJECT}:127.0.0.1 paused until {(t0 + timedelta(seconds=30)).isoformat()}" \
            in last["error_message"]
        clock.advance(1)
        aio(eng.drive())
    finally:
        aio(reg.aclose())
    assert len(side.calls) == N + 1 and all(t == t0 + timedelta(seconds=30) for t in side.calls[1:])
    states = [aio(run_row(store, r))["state"] for r in run_ids]
    assert states.count("succeeded") == N
    attempts = [a for r in run_ids for a in aio(store.list_attempts(r))]
    assert sum(counts_against_budget(a["status"], a["error_code"]) for a in attempts) == 0
    assert {a["error_code"] for a in attempts if a["status"] == "failed"} == {E_UPSTREAM_429}


def test_a_503_with_retry_after_pauses_and_a_long_retry_after_is_clamped_to_max_pause(store, clock, far_side, aio):
    side = far_side([(503, {"Retry-After": "7200"})])
    run_ids = aio(queue_runs(store, http_workflow(side.url + "/x", maxPause="1m"), 3))
    reg = ConnectorRegistry()
    eng = Engine(store, reg, clock=clock)
    try:
        t0 = clock.now()
        aio(eng.run_once(limit=1))
        aio(eng.drive())
        assert [aio(run_row(store, r))["next_wake_at"] for r in run_ids] == [t0 + timedelta(seconds=60)] * 3
        clock.advance(60)
        aio(eng.drive())
    finally:
        aio(reg.aclose())
    assert len(side.calls) == 4 and [aio(run_row(store, r))["state"] for r in run_ids] == ["succeeded"] * 3


def test_a_503_without_a_readable_retry_after_is_a_plain_retryable_error(store, clock, far_side, aio):
    side = far_side([(503, {"Retry-After": "soon"})])
    (run_id,) = aio(queue_runs(store, http_workflow(side.url + "/x"), 1))
    reg = ConnectorRegistry()
    try:
        aio(Engine(store, reg, clock=clock).drive())
    finally:
        aio(reg.aclose())
    assert aio(run_row(store, run_id))["state"] == "failed"        # it used the budget it did not have
    assert [a["error_code"] for a in aio(store.list_attempts(run_id))] == ["E_UPSTREAM_503"]


def test_a_rate_key_shares_the_pause_across_hosts(store, clock, far_side, aio):
    one, other = far_side([(429, {"Retry-After": "10"})]), far_side([])
    first = aio(publish_and_run(store, http_workflow(one.url + "/a", name="a", rateKey="erp"), key="a"))
    second = aio(publish_and_run(store, http_workflow(other.url.replace("127.0.0.1", "localhost") + "/b", name="b",
                                                      rateKey="erp"), key="b"))
    reg = ConnectorRegistry()
    eng = Engine(store, reg, clock=clock)
    try:
        aio(eng.run_once(limit=1))
        aio(eng.drive())
        assert other.calls == []                       # another host, the same key: paused too
        clock.advance(10)
        aio(eng.drive())
    finally:
        aio(reg.aclose())
    assert [aio(run_row(store, r))["state"] for r in (first, second)] == ["succeeded"] * 2
    assert len(other.calls) == 1


async def paused_keys(store) -> float:
    """automation_flow_paused_keys of the project, as a scrape reads it from PostgreSQL."""
    (fam,) = [f for f in await collect(store) if f.name == "automation_flow_paused_keys"]
    return sum(v for _, labels, v in fam.samples if labels["project"] == PROJECT)


def test_resume_by_hand_wakes_the_runs_waiting_on_the_key(store, clock, far_side, aio):
    side = far_side([(429, {"Retry-After": "600"})])
    run_ids = aio(queue_runs(store, http_workflow(side.url + "/x"), 5))
    key = f"http:{PROJECT}:127.0.0.1"
    reg = ConnectorRegistry()
    eng = Engine(store, reg, clock=clock)
    try:
        aio(eng.run_once(limit=1))
        aio(eng.drive())
        (paused,) = aio(list_paused(store, PROJECT))
        assert paused["key"] == key and paused["source"] == "upstream" and paused["paused_until"] == clock.now() + timedelta(seconds=600)
        assert aio(paused_keys(store)) == 1
        clock.advance(5)
        done = aio(resume_key(store, PROJECT, key, by="ana"))
        assert done["woken"] == 5 and not done["paused"] and aio(paused_keys(store)) == 0
        aio(eng.drive())                              # at the same instant: every run goes
    finally:
        aio(reg.aclose())
    assert [aio(run_row(store, r))["state"] for r in run_ids] == ["succeeded"] * 5 and len(side.calls) == 6
    assert aio(list_paused(store, PROJECT)) == []
    with pytest.raises(A44Error) as exc:
        aio(resume_key(store, PROJECT, key, by="ana"))
    assert exc.value.code == E_FLOW_KEY_NOT_FOUND


def test_an_operator_pause_holds_calls_and_shortening_it_moves_the_waiting_runs(store, clock, far_side, aio, pg_url,
                                                                                 capsys, monkeypatch):
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    monkeypatch.setenv("A44_PROJECT", PROJECT)
    side = far_side([])
    (run_id,) = aio(queue_runs(store, http_workflow(side.url + "/x", rateKey="erp"), 1))
    reg = ConnectorRegistry()
    eng = Engine(store, reg, clock=clock)
    t0 = clock.now()
    try:
        row = aio(pause_key(store, PROJECT, "erp", t0 + timedelta(hours=2), by="ana", reason="ERP maintenance"))
        assert row["paused_by"] == "ana" and row["woken"] == 0
        aio(eng.drive())
        assert side.calls == [] and aio(run_row(store, run_id))["next_wake_at"] == t0 + timedelta(hours=2)
        code, out, _ = run_cli(capsys, "automation", "logs", run_id, "--local")   # the run says on what it waits
        assert code == 0 and f"waiting on flow key erp paused until {(t0 + timedelta(hours=2)).isoformat()}" in out
        assert aio(pause_key(store, PROJECT, "erp", t0 + timedelta(minutes=1), by="ana"))["woken"] == 1
        assert aio(run_row(store, run_id))["next_wake_at"] == t0 + timedelta(minutes=1)
        clock.advance(59)
        aio(eng.drive())
        assert side.calls == []
        clock.advance(1)
        aio(eng.drive())
    finally:
        aio(reg.aclose())
    assert aio(run_row(store, run_id))["state"] == "succeeded" and len(side.calls) == 1
    for bad in (t0, t0 + timedelta(days=31)):
        with pytest.raises(A44Error) as exc:
            aio(pause_key(store, PROJECT, "erp", bad, by="ana"))
        assert exc.value.code == E_FLOW_PAUSE_INVALID


def test_two_429s_at_once_keep_the_later_end(store, clock, aio):
    """Two daemons' attempts in flight together both get 429: whichever records second, the longer pause stays."""
    pauses = StorePauses(store)
    now = clock.now()
    assert aio(pauses.pause(PROJECT, "k", now, now + timedelta(seconds=30), "429")) == now + timedelta(seconds=30)
    assert aio(pauses.pause(PROJECT, "k", now, now + timedelta(seconds=10), "429")) == now + timedelta(seconds=30)
    assert aio(pauses.paused_until(PROJECT, "k", now + timedelta(seconds=29))) == now + timedelta(seconds=30)
    assert aio(pauses.paused_until(PROJECT, "k", now + timedelta(seconds=30))) is None


def test_a_declared_connector_sets_the_key_and_the_max_pause(store, clock, far_side, aio):
    from anthares44.automation.compiler.models.connectors import ConnectorDecl

    side = far_side([(429, {"Retry-After": "7200"})])
    decl = ConnectorDecl.model_validate({"id": "con_erp", "type": "http", "baseUrl": side.url, "rateKey": "erp",
                                         "maxPause": "2m"})
    step = node("call", params={"path": "/orders"}, retry=(0, "none"))
    ir = workflow([step.model_copy(update={"connector": ConnectorRef(uses="con_erp", kind="declared",
                                                                     type="http")})], name="declared")
    run_id = aio(publish_and_run(store, ir))
    reg = ConnectorRegistry([decl])
    eng = Engine(store, reg, clock=clock)
    try:
        aio(eng.drive())
        (paused,) = aio(list_paused(store, PROJECT))
        assert paused["key"] == "erp" and paused["paused_until"] == clock.now() + timedelta(minutes=2)
        clock.advance(120)
        aio(eng.drive())
    finally:
        aio(reg.aclose())
    assert aio(run_row(store, run_id))["state"] == "succeeded" and len(side.calls) == 2


def test_another_daemon_sees_the_pause_within_a_second(store, clock, far_side, aio):
    """Daemon B read the project's pauses just before daemon A's call got its 429: B's view is at most a second
    old, so a call of B in that second still goes (and would be answered 429); from the next second on B refuses."""
    side = far_side([(200, {}), (429, {"Retry-After": "30"})])
    ir = http_workflow(side.url + "/x")
    reg_a, reg_b = ConnectorRegistry(), ConnectorRegistry()
    a = Engine(store, reg_a, clock=clock, worker_id="a")
    b = Engine(store, reg_b, clock=clock, worker_id="b")
    t0 = clock.now()
    try:
        aio(publish_and_run(store, ir, key="warm"))
        aio(b.run_once(limit=1))                          # B reads the pauses of the project: none
        aio(publish_and_run(store, ir, key="first"))
        aio(a.run_once(limit=1))                          # A's call: 429, the key paused until t0 + 30 s
        aio(publish_and_run(store, ir, key="same-second"))
        aio(b.run_once(limit=1))                          # B's view is fresh: this call still goes
        later = aio(publish_and_run(store, ir, key="later"))
        clock.advance(1)
        aio(b.drive())                                    # B read the pauses again: refused
        assert aio(run_row(store, later))["next_wake_at"] == t0 + timedelta(seconds=30)
        for _ in range(28):
            clock.advance(1)
            aio(b.drive())
            aio(a.drive())
        assert side.calls == [t0, t0, t0]
        clock.advance(1)
        aio(a.drive())
    finally:
        aio(reg_a.aclose())
        aio(reg_b.aclose())
    assert side.calls[3:] == [t0 + timedelta(seconds=30)] * 2
