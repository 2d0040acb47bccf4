"""Event-wait workflows for the tests of tests/waits (§20): compiled from YAML, so the IR carries the CEL as the
compiler writes it; published beside a run the way tests/runtime/engine_support does."""

from __future__ import annotations

from anthares44.automation.compiler import ir as irmod
from anthares44.automation.compiler.lint import compile_sources
from anthares44.automation.compiler.source import load_text
from anthares44.automation.diagnostics import Severity
from anthares44.automation.runtime.ingestion.bus import publish_event
from tests.runtime.engine_support import PROJECT

TYPE = "billing.payment.received"


def event_workflow(name: str = "pay", *, since: str | None = None, timeout: str = "1h", on_timeout: str = "fail",
                   condition: str | None = None, correlate: str = '{run: "input.invoiceId", event: "data.invoiceId"}',
                   waits: int = 1) -> irmod.WorkflowIR:
    lines = [f"name: {name}", "version: 1", "steps:"]
    for i in range(waits):
        lines += [f"  - id: {'pay' if waits == 1 else f'pay{i}'}", "    wait:", f"      event: {TYPE}",
                  f"      correlate: {correlate}", f"      timeout: {timeout}", f"      onTimeout: {on_timeout}"]
        lines += [f"      since: \"{since}\""] if since else []
        lines += [f"      if: {condition!r}".replace("'", '"')] if condition else []
    lines += ["  - id: after", "    uses: pass", "    timeout: 5s"]
    res = compile_sources([load_text("\n".join(lines) + "\n", f"{name}.yaml")], "lint", lower=True)
    errors = [d for d in res.diagnostics if d.severity is Severity.ERROR]
    assert not errors, errors
    [ir] = [v for v in res.irs.values() if isinstance(v, irmod.WorkflowIR)]
    return ir


async def publish(store, ir: irmod.WorkflowIR) -> None:
    await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, irmod.to_json(ir))


async def start(store, ir: irmod.WorkflowIR, invoice: str, key: str | None = None, **extra) -> str:
    return (await store.create_run(PROJECT, ir.workflow_id, {"invoiceId": invoice, **extra},
                                   key or f"run-{invoice}")).run_id


async def pay(store, invoice: str, key: str | None = None, **data) -> str:
    got = await publish_event(store, PROJECT, TYPE, {"invoiceId": invoice, **data}, key or f"pay-{invoice}")
    return got.event_id


async def output(store, run_id: str, step: str = "pay"):
    for a in await store.list_attempts(run_id):
        if a["step_id"] == step and a["status"] == "succeeded":
            return store.load_result(a)
    return None


async def event_waits(store, run_id: str) -> list[dict]:
    return [dict(r) for r in await store.fetch("event_waits_of_run", run_id=run_id)]


async def waits(store, run_id: str) -> list[dict]:
    return [dict(r) for r in await store.fetch("run_waits_of_run", run_id=run_id)]
