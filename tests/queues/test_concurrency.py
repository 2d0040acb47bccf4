"""Proof of §10.1/§10.2 across two daemons on one database: the queue cap and a workflow's concurrency.max are
never exceeded, same-key runs never overlap and start in ingestion order (also across retry waits and
redeliveries), with random step latencies and failures (seeded, bounded)."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import ConcurrencyIR, seal, to_json
from anthares44.automation.compiler.models.queues import Queue
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.engine import Daemon, WorkerSettings
from anthares44.automation.runtime.queues import store_queues
from anthares44.automation.runtime.store.core import TERMINAL_RUN_STATES, Store
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.runtime.engine_support import PROJECT, node, workflow

QUEUE_CAP, WF_B_MAX = 5, 2


class Flaky:
    """Random latency, random retryable (503) and permanent (400) failures; tracks what is in flight."""
    params_model = None

    def __init__(self, seed: int):
        self.name = "flaky"
        self.rng = random.Random(seed)
        self.inflight: dict[str, int] = {"all": 0, "wf_b": 0}
        self.peak = {"all": 0, "wf_b": 0}
        self.by_run: dict[str, list[tuple[float, float]]] = {}

    async def invoke(self, params, ctx):
        loop = asyncio.get_running_loop()
        wf = params["wf"]
        self.inflight["all"] += 1
        if wf == "wf_b":
            self.inflight["wf_b"] += 1
        for k in self.peak:
            self.peak[k] = max(self.peak[k], self.inflight[k])
        t0 = loop.time()
        try:
            await asyncio.sleep(self.rng.uniform(0.001, 0.02))
            roll = self.rng.random()
            if roll < 0.12:
                raise A44Error("E_UPSTREAM_503", "flaky 503")
            if roll < 0.16:
                raise A44Error("E_UPSTREAM_400", "flaky 400")
            return {"ok": True}
        finally:
            self.inflight["all"] -= 1
            if wf == "wf_b":
                self.inflight["wf_b"] -= 1
            self.by_run.setdefault(ctx.run_id, []).append((t0, loop.time()))


def _ir(name: str, max_: int):
    nodes = [node(s, uses="flaky", retry=(2, "fixed"), base_ms=30, params={"wf": f"wf_{name}"}) for s in ("s1", "s2")]
    ir = workflow(nodes, name=name)
    return seal(ir.model_copy(update={"queue": "q_test", "concurrency": ConcurrencyIR(max=max_)}))


def test_two_daemons_respect_caps_and_partition_order(pg_url, aio, tmp_path):
    aio(_scenario(pg_url, tmp_path, seed=11))


async def _scenario(pg_url, tmp_path, seed: int):
    rng = random.Random(seed)
    admin = await Store.connect(pg_url, clock=SystemClock(), results_dir=tmp_path / "r")
    await admin.ensure_partitions()
    await store_queues(admin, PROJECT, [Queue(id="q_test", maxConcurrency=QUEUE_CAP, ordering="by-partition",
                                              maxAttempts=2)])
    a, b = _ir("a", 100), _ir("b", WF_B_MAX)
    for ir in (a, b):
        await admin.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    keys = [f"k{i}" for i in range(6)]
    for i in range(70):
        if rng.random() < 0.75:
            await admin.create_run(PROJECT, a.workflow_id, {"i": i}, f"a{i}", partition_key=rng.choice(keys),
                                   queue="q_test")
        else:
            await admin.create_run(PROJECT, b.workflow_id, {"i": i}, f"b{i}", queue="q_test")
    flaky = Flaky(seed)
    daemons, stores = [], []
    for w in ("d1", "d2"):
        reg = ConnectorRegistry()
        reg.register(flaky)
        st = await Store.connect(pg_url, clock=SystemClock(), results_dir=tmp_path / w, max_size=6)
        stores.append(st)
        daemons.append(Daemon(WorkerSettings(database_url=pg_url, worker_id=w, concurrency=8, schedules=False,
                                             lease_timeout=timedelta(seconds=10)), store=st, registry=reg))
    tasks = [asyncio.create_task(d.serve()) for d in daemons]
    try:
        async with asyncio.timeout(60):
            while True:
                await asyncio.sleep(0.2)
                async with admin.connection("t") as c:
                    n = await c.fetchval("select count(*) from automation.runs where state <> all($1::text[])",
                                         list(TERMINAL_RUN_STATES))
                if n == 0:
                    break
    finally:
        for d in daemons:
            d.request_stop()
        await asyncio.gather(*tasks, return_exceptions=True)
    # 1. caps, observed in the connector (one step of a run at a time, so in-flight calls <= leased runs)
    assert flaky.peak["all"] <= QUEUE_CAP, flaky.peak
    assert flaky.peak["wf_b"] <= WF_B_MAX, flaky.peak
    assert flaky.peak["all"] >= 3          # it did run in parallel
    # 2. the same caps from the log: leased intervals (grant -> release/terminal) from run_events
    async with admin.connection("t") as c:
        ev = await c.fetch("""select e.run_id, e.at, e.id, e.state, r.workflow_id from automation.run_events e
                              join automation.runs r using (run_id) where e.kind = 'run.state' order by e.id""")
        runs = await c.fetch("""select run_id, coalesce(origin_run_id, run_id) as msg, partition_key, seq, state,
                                       workflow_id from automation.runs""")
    held: dict[str, str] = {}
    peak_q = peak_b = 0
    for e in ev:
        if e["state"] in ("running", "compensating"):
            held[e["run_id"]] = e["workflow_id"]
        else:
            held.pop(e["run_id"], None)
        peak_q = max(peak_q, len(held))
        peak_b = max(peak_b, sum(1 for w in held.values() if w == "wf_b"))
    assert peak_q <= QUEUE_CAP and peak_b <= WF_B_MAX, (peak_q, peak_b)
    # 3. per key: messages (all deliveries) never overlap and start in ingestion (seq) order
    span: dict[str, list] = {}
    for r in runs:
        calls = flaky.by_run.get(r["run_id"], [])
        if not calls:
            continue
        s = span.setdefault(r["msg"], [r["partition_key"], r["seq"], float("inf"), float("-inf"), r["workflow_id"]])
        s[2] = min(s[2], min(c[0] for c in calls))
        s[3] = max(s[3], max(c[1] for c in calls))
    by_key: dict[str, list] = {}
    for pk, seq, t0, t1, _wf in span.values():
        if pk is not None:
            by_key.setdefault(pk, []).append((seq, t0, t1))
    assert len(by_key) >= 4
    for pk, items in by_key.items():
        items.sort()
        for (s1, _a0, a1), (s2, b0, _b1) in zip(items, items[1:]):
            assert b0 >= a1, f"{pk}: seq {s2} started before seq {s1} ended"
    assert {r["state"] for r in runs} <= TERMINAL_RUN_STATES
    assert any(r["state"] == "failed" for r in runs)   # failures happened (and were redelivered / dead-lettered)
    for st in stores:
        await st.close()
    await admin.close()
