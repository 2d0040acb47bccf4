"""Helpers of the engine tests: IR built directly (the tests' own connectors are not known to the compiler),
publishing it, a scripted connector with real behaviour (fails, times out, blocks), and commit counting from
pg_stat_database."""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict
from contextlib import contextmanager
from datetime import timedelta

import asyncpg
import asyncpg.connection

from anthares44.automation.compiler.ir import (
    CompensationIR,
    ConcurrencyIR,
    ConnectorRef,
    Expr,
    NodeIR,
    RetryIR,
    WorkflowIR,
    seal,
    to_json,
)
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.engine import Engine
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry

PROJECT = "pj_default"


def ref(uses: str = "script") -> ConnectorRef:
    return ConnectorRef(uses=uses, kind="builtin", type=None)


def node(id: str, *, uses: str = "script", timeout_ms: int = 5_000, retry: tuple[int, str] = (0, "none"),
         base_ms: int = 1_000, cap_ms: int = 300_000, compensate: str | None = None, condition: str | None = None,
         exclusive: bool = False, sleep_ms: int | None = None, params: dict | None = None,
         comp_timeout_ms: int = 5_000) -> NodeIR:
    cond = None
    if condition is not None:
        from anthares44.automation.grammar import compile_expression

        res = compile_expression(condition, roots={"input", "steps", "trigger", "run"})
        assert res.program is not None, res.issues
        cond = Expr(cel=condition, program=res.program.to_ir())
    comp = None
    if compensate is not None:
        comp = CompensationIR(connector=ref(compensate), timeout_ms=comp_timeout_ms, params={"undo": id})
    return NodeIR(id=id, index=0, kind="sleep" if sleep_ms is not None else "call",
                  connector=None if sleep_ms is not None else ref(uses),
                  timeout_ms=None if sleep_ms is not None else timeout_ms,
                  retry=RetryIR(max=retry[0], strategy=retry[1], base_ms=base_ms, cap_ms=cap_ms),
                  compensate=comp, condition=cond, exclusive=exclusive, sleep_ms=sleep_ms,
                  params=params if params is not None else {"step": id})


def workflow(nodes: list[NodeIR], edges: list[tuple[str, str]] | None = None, name: str = "t",
             version: int = 1) -> WorkflowIR:
    nodes = [n.model_copy(update={"index": i}) for i, n in enumerate(nodes)]
    if edges is None:  # written order
        edges = [(a.id, b.id) for a, b in zip(nodes, nodes[1:])]
    ir = WorkflowIR(workflow_id=f"wf_{name}", name=name, version=version, queue="q_default",
                    concurrency=ConcurrencyIR(max=100), deadline_ms=72 * 3600 * 1000, lease_ms=30_000,
                    triggers=(), nodes=tuple(nodes), edges=tuple(edges))
    return seal(ir)


async def publish_and_run(store, ir: WorkflowIR, *, input=None, key: str = "k1") -> str:
    await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    created = await store.create_run(PROJECT, ir.workflow_id, input if input is not None else {}, key)
    return created.run_id


class Script:
    """A real connector driven by a per-step script of outcomes, consumed one per call:
    ok | retry (E_UPSTREAM_503) | perm (E_UPSTREAM_400) | timeout (sleeps past the step timeout) |
    circuit (E_CIRCUIT_OPEN) | block:<event> (waits for events[<event>]) | set:<event>+wait:<other>.
    Every call is recorded as (step_id, kind, attempt, idempotency_key)."""

    params_model = None

    def __init__(self, name: str = "script", plan: dict[str, list[str]] | None = None):
        self.name = name
        self.plan = defaultdict(list, {k: list(v) for k, v in (plan or {}).items()})
        self.calls: list[tuple[str, str, int, str]] = []
        self.events: dict[str, asyncio.Event] = defaultdict(asyncio.Event)

    async def invoke(self, params, ctx):
        kind = "compensation" if ctx.idempotency_key.endswith(":compensate") else "action"
        self.calls.append((ctx.step_id, kind, ctx.attempt, ctx.idempotency_key))
        todo = self.plan[ctx.step_id].pop(0) if self.plan[ctx.step_id] else "ok"
        for part in todo.split("+"):
            if part.startswith("set:"):
                self.events[part[4:]].set()
            elif part.startswith("wait:") or part.startswith("block:"):
                await self.events[part.split(":", 1)[1]].wait()
        if todo == "retry":
            raise A44Error("E_UPSTREAM_503", "the far side answered 503")
        if todo == "perm":
            raise A44Error("E_UPSTREAM_400", "the far side answered 400")
        if todo == "circuit":
            raise A44Error("E_CIRCUIT_OPEN", "open")
        if todo == "timeout":
            await asyncio.sleep(30)
        return {"step": ctx.step_id, "attempt": ctx.attempt, "params": params, "rowCount": 2}

    def called(self, step_id: str) -> int:
        return sum(1 for c in self.calls if c[0] == step_id)


def engine(store, *connectors, clock=None, seed: int = 7, worker_id: str = "w1", lease_s: float = 30,
           concurrency: int = 16) -> Engine:
    reg = ConnectorRegistry()
    for c in connectors:
        reg.register(c)
    return Engine(store, reg, worker_id=worker_id, lease=timedelta(seconds=lease_s), clock=clock,
                  rng=random.Random(seed), concurrency=concurrency)


async def run_row(store, run_id: str) -> dict:
    return await store.get_run(run_id)


async def attempts(store, run_id: str) -> list[tuple]:
    return [(a["step_id"], a["kind"], a["attempt"], a["status"], a["error_code"])
            for a in await store.list_attempts(run_id)]


async def state_changes(store, run_id: str) -> list[tuple[str, str]]:
    return [(e["data"]["from"], e["state"]) for e in await store.list_run_events(run_id)
            if e["kind"] == "run.state"]


async def xact_commits(url: str) -> int:
    """Commits of this database so far. A fresh connection reads it after the workers' connections closed (a
    backend flushes its counters when it exits), and pg_stat_force_next_flush covers this session's own."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("select pg_stat_clear_snapshot()")
        return await conn.fetchval("select xact_commit from pg_stat_database where datname = current_database()")
    finally:
        await conn.close()


def count_transactions(store) -> Counter[str]:
    """Count the store operations that took a pooled connection (each is one transaction, explicit or
    implicit), by operation name; the counter fills as the store is used."""
    from collections import Counter
    from contextlib import asynccontextmanager

    counts: Counter[str] = Counter()
    original = store.connection

    @asynccontextmanager
    async def counted(operation: str, **kw):
        counts[operation] += 1
        async with original(operation, **kw) as conn:
            yield conn

    store.connection = counted
    return counts


@contextmanager
def watch_statements(note):
    """While inside, `note(conn, label)` for every round trip asyncpg sends: a simple query (BEGIN, COMMIT, a
    pool reset) labelled by its first word, a parameterised statement by its SQL text."""
    C = asyncpg.connection.Connection
    simple, bound = C.execute, C._execute

    async def execute(self, q, *args, timeout=None):
        if not args:
            note(self, q.split()[0].lower().rstrip(";"))
        return await simple(self, q, *args, timeout=timeout)

    async def _execute(self, q, args, limit, timeout, **kw):
        note(self, q)
        return await bound(self, q, args, limit, timeout, **kw)

    C.execute, C._execute = execute, _execute
    try:
        yield
    finally:
        C.execute, C._execute = simple, bound
