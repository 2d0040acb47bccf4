"""The engine's CPU around one connector call (issue 16): `invoke()` of a connector that does nothing, as the
interpreter calls it (resolve, render if templated, validate, context, timeout, registry wrapping, scrubbing),
in microseconds per call. No database, no network: what is left is what the engine adds to every attempt. Not a
test: it prints figures.

    .venv/bin/python bench/bench_invoke.py [--calls 20000] [--repeat 5]
    A44_BENCH_TREE=/path/to/other/checkout .venv/bin/python bench/bench_invoke.py     # the same, another tree

Three cases: a connector without a params model (`pass`-like), the same with a pydantic params model (`http`-like
parameters), and a templated parameter (rendered off the event loop). Medians of --repeat; CPU time of the process
(time.process_time), which the event loop's own work is part of.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.environ.get("A44_BENCH_TREE") or str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel  # noqa: E402

from anthares44.automation.compiler.ir import ConnectorRef  # noqa: E402
from anthares44.automation.runtime.engine.invoke import Call, invoke  # noqa: E402
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry  # noqa: E402


class Params(BaseModel):
    method: str = "POST"
    url: str
    json_: dict | None = None
    headers: dict[str, str] = {}


class Nothing:
    name = "bench/nothing"
    params_model = None

    async def invoke(self, params, ctx):
        return {"status": 200, "body": {"ok": True}}


class NothingModelled(Nothing):
    name = "bench/modelled"
    params_model = Params


async def per_call_us(registry: ConnectorRegistry, call: Call, calls: int, services: dict) -> float:
    scope = _scope_arg({"input": {"n": 1}, "steps": {}, "trigger": {}, "run": {"id": "run_x"}})
    t = time.process_time()
    for _ in range(calls):
        out = await invoke(registry, call, scope, run_id="run_x", project_id="pj_default",
                           workflow_id="wf_x", idempotency_key="run_x:s1", services=services)
        if out.status != "succeeded":
            raise SystemExit(f"the call failed: {out.error}")
    return (time.process_time() - t) / calls * 1e6


def _scope_arg(scope: dict):
    """invoke() took the scope itself, then (issue 16) a function that makes it: what this tree wants."""
    import inspect

    from anthares44.automation.runtime.engine import invoke as mod

    wants_callable = "Callable" in str(inspect.signature(mod.invoke).parameters["scope"].annotation)
    return (lambda: scope) if wants_callable else scope


async def main(calls: int, repeat: int) -> None:
    registry = ConnectorRegistry(secrets={})
    registry.register(Nothing())
    registry.register(NothingModelled())
    services = {"app_db": object(), "publisher": object(), "breaker_state": object(), "networks_file": None}
    nothing = ConnectorRef(uses="bench/nothing", kind="builtin", type=None)
    modelled = ConnectorRef(uses="bench/modelled", kind="builtin", type=None)
    cases = {
        "no params model": Call("s1", nothing, {"a": 1, "b": [1, 2]}, 5000, 1),
        "pydantic params": Call("s1", modelled, {"method": "POST", "url": "http://127.0.0.1:1/step",
                                                 "json_": {"n": 1}}, 5000, 1),
        "one template": Call("s1", nothing, {"a": {"$tpl": "{{ input.n }}"}, "b": [1, 2]}, 5000, 1),
    }
    print(f"# tree: {sys.path[0]}; {calls:,} calls per figure, medians of {repeat}")
    print("| case | engine CPU per call, us |")
    print("|---|---|")
    for name, call in cases.items():
        xs = [await per_call_us(registry, call, calls, services) for _ in range(repeat)]
        print(f"| {name} | {statistics.median(xs):.1f} |", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    asyncio.run(main(args.calls, args.repeat))
