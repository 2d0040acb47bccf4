"""Helpers of the flow-limit tests: a `pass` workflow with flow limits built as IR, runs of it per tenant, and the
live holders of each key read from the runs themselves (what the claim counts)."""

from __future__ import annotations

from anthares44.automation.compiler.ir import Expr, FairnessIR, FlowIR, KeyLimitIR, WindowIR, seal, to_json
from anthares44.automation.grammar import compile_expression
from tests.runtime.engine_support import PROJECT, node, workflow
from tests.store_queries import fetch


def expr(text: str) -> Expr:
    res = compile_expression(text, roots={"input"})
    assert res.program is not None, res.issues
    return Expr(cel=text, program=res.program.to_ir())


def limited(name: str, concurrency=(), throttle=None, rate=None, nodes=None, priority=None, fairness=None):
    """A workflow of one inline `pass` step (or `nodes`) with flow limits:
    concurrency = [(key CEL, limit, scope, hold)], throttle/rate = (key CEL, limit, per_ms, burst)."""
    ir = workflow(nodes or [node("a", uses="pass", params={})], name=name)
    flow = FlowIR(concurrency=tuple(KeyLimitIR(key=expr(k), limit=n, scope=s, hold=h) for k, n, s, h in concurrency),
                  throttle=WindowIR(key=expr(throttle[0]), limit=throttle[1], per_ms=throttle[2], burst=throttle[3])
                  if throttle else None,
                  rate_limit=WindowIR(key=expr(rate[0]), limit=rate[1], per_ms=rate[2]) if rate else None,
                  priority=expr(priority) if isinstance(priority, str) else priority,
                  fairness=FairnessIR(key=expr(fairness[0]), weight=expr(fairness[1]) if fairness[1] else None)
                  if fairness else None)
    return seal(ir.model_copy(update={"flow": flow}))


async def publish(store, ir) -> None:
    await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))


async def enqueue(store, ir, tenant: str, n: int, start: int = 0, **extra) -> list[str]:
    out = []
    for i in range(start, start + n):
        created = await store.create_run(PROJECT, ir.workflow_id, {"tenant": tenant, "i": i, **extra},
                                         f"{ir.workflow_id}-{tenant}-{i}")
        out.append(created.run_id)
    return out


async def holders(store) -> dict[str, int]:
    """Live holders per key, counted from the runs (a slot is a run's lease, or its start for a hold key)."""
    return {r["key"]: r["n"] for r in await fetch(store, "flow_holders")}
