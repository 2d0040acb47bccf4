"""The poison-run scenario of tests/runtime/test_poison.py and bench/bench_poison.py: two real `serve` daemons on one
database, N healthy runs alone (the baseline), then N healthy runs again next to poison runs (the incident's nested
Jinja `range` loop and its catastrophic regex `if:`); healthy latency (created_at -> finished_at, from the runs
table) of both phases, the poison runs' outcome, and every lease re-grant and interrupted attempt."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import Expr, NodeIR, to_json
from anthares44.automation.grammar import compile_expression
from anthares44.automation.runtime.store.core import Store
from tests.runtime.daemon_support import FarSide, ServeProcess, call
from tests.runtime.engine_support import workflow

NESTED_RANGE = "{% for i in range(input.n) %}{% for j in range(input.n) %}{% endfor %}{% endfor %}"
CATASTROPHIC = r"input.code.matches('^(\\d|\\d\\d)*-$')"
PACE_S = 0.01                 # healthy arrivals: one every 10 ms, so N = 100 spans about the poisons' lifetime
TERMINAL = ("succeeded", "failed", "cancelled", "compensation_failed")


def _when(n: NodeIR, cel: str) -> NodeIR:
    res = compile_expression(cel, roots={"input", "steps", "trigger", "run"})
    assert res.program is not None, res.issues
    return n.model_copy(update={"condition": Expr(cel=cel, program=res.program.to_ir())})


def workflows(far: FarSide):
    healthy = workflow([
        call("fetch", "http", {"method": "POST", "url": far.url("/ok/healthy"), "json": {"run": {"$tpl": "{{ run.id }}"}}}),
        _when(call("decide", "pass", {"output": {"$tpl": "{{ run.id }}-{{ input.code }}"}}),
              "input.code.matches('^[0-9]+$')"),
    ], name="healthy")
    poison_template = workflow([call("render", "pass", {"output": {"$tpl": NESTED_RANGE}}, retries=0)],
                               name="poison-template")
    poison_regex = workflow([_when(call("check", "pass", {"output": "matched"}, retries=0), CATASTROPHIC)],
                            name="poison-regex")
    return healthy, poison_template, poison_regex


@dataclass
class Figures:
    baseline_s: list[float] = field(default_factory=list)
    poisoned_s: list[float] = field(default_factory=list)
    poison: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)  # run -> (workflow, state, code)
    healthy_states: dict[str, int] = field(default_factory=dict)
    lease_reclaims: int = 0
    lease_expired_attempts: int = 0

    @property
    def ratio(self) -> float:
        return statistics.median(self.poisoned_s) / statistics.median(self.baseline_s)

    @staticmethod
    def p90(xs: list[float]) -> float:
        return sorted(xs)[int(len(xs) * 0.9)]


async def _create(store: Store, ir, n: int, prefix: str, input: dict, every_s: float = 0.0) -> list[str]:
    """`n` runs, one every `every_s` (a steady arrival rate: latency then measures the daemons, not a queue)."""
    ids = []
    for i in range(n):
        ids.append((await store.create_run("pj_default", ir.workflow_id, input, f"{prefix}{i}")).run_id)
        if every_s:
            await asyncio.sleep(every_s)
    return ids


async def _wait(url: str, run_ids: list[str], timeout: float) -> list:
    conn = await asyncpg.connect(url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            rows = await conn.fetch("select run_id, workflow_id, state, error_code, "
                                    "extract(epoch from finished_at - created_at) as latency "
                                    "from automation.runs where run_id = any($1)", run_ids)
            if all(r["state"] in TERMINAL for r in rows) and len(rows) == len(run_ids):
                return rows
            if time.monotonic() > deadline:
                stuck = sorted({r["state"] for r in rows if r["state"] not in TERMINAL})
                raise AssertionError(f"runs still {stuck} after {timeout}s")
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def _scenario(url: str, home: Path, far: FarSide, n: int, poisons: int, timeout: float) -> Figures:
    healthy, poison_template, poison_regex = workflows(far)
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    figures = Figures()
    try:
        await store.migrate()
        await store.ensure_partitions()
        for ir in (healthy, poison_template, poison_regex):
            await store.publish_version("pj_default", ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        # warm-up: both daemons connected, connectors loaded and templates compiled before anything is measured
        await _wait(url, await _create(store, healthy, 10, "warm", {"code": "42"}), timeout)
        base = await _create(store, healthy, n, "base", {"code": "42"}, PACE_S)
        figures.baseline_s = [float(r["latency"]) for r in await _wait(url, base, timeout)]
        bad = await _create(store, poison_template, poisons, "tpl", {"n": 20_000})
        bad += await _create(store, poison_regex, poisons, "re", {"code": "1" * 40})
        hot = await _create(store, healthy, n, "hot", {"code": "42"}, PACE_S)
        rows = await _wait(url, hot + bad, timeout)
    finally:
        await store.close()
    for r in rows:
        if r["run_id"] in bad:
            figures.poison[r["run_id"]] = (r["workflow_id"], r["state"], r["error_code"])
        else:
            figures.poisoned_s.append(float(r["latency"]))
            figures.healthy_states[r["state"]] = figures.healthy_states.get(r["state"], 0) + 1
    conn = await asyncpg.connect(url)
    try:
        figures.lease_reclaims = await conn.fetchval("select coalesce(sum(lease_reclaims), 0) from automation.runs")
        figures.lease_expired_attempts = await conn.fetchval(
            "select count(*) from automation.step_attempts where status = 'lease_expired'")
    finally:
        await conn.close()
    return figures


def run_scenario(url: str, home: Path, *, n: int, poisons: int = 2, lease: str = "3s",
                 timeout: float = 120) -> Figures:
    """Two daemons (lease `lease`, so a loop frozen for longer loses its leases) over both phases."""
    far = FarSide()
    daemons = [ServeProcess(url, home, worker_id=f"poison-d{i}", lease=lease) for i in (1, 2)]
    try:
        return asyncio.run(_scenario(url, home, far, n, poisons, timeout))
    finally:
        for d in daemons:
            d.stop()
        far.close()
