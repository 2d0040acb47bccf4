"""Helpers of the child-workflow tests: child nodes built as IR (the tests' scripted connector is not known to the
compiler), publishing a parent with its children, and reading a run's tree and outputs."""

from __future__ import annotations

from anthares44.automation.compiler.ir import ChildIR, ConnectorRef, NodeIR, RetryIR, WorkflowIR, to_json
from tests.runtime.engine_support import PROJECT


def child_node(id: str, workflow_id: str, *, input=None, wait: str = "result", timeout_ms: int = 3_600_000,
               on_timeout: str = "cancel", on_parent_cancel: str = "cancel", compensate: str | None = None,
               version: int = 1) -> NodeIR:
    comp = None
    if compensate is not None:
        from anthares44.automation.compiler.ir import CompensationIR

        comp = CompensationIR(connector=ConnectorRef(uses=f"workflow/{compensate}", kind="builtin", type="workflow"),
                              timeout_ms=timeout_ms, params={})
    return NodeIR(id=id, index=0, kind="child", connector=None, timeout_ms=timeout_ms,
                  retry=RetryIR(max=0, strategy="none", base_ms=1000, cap_ms=1000), compensate=comp, condition=None,
                  exclusive=False, sleep_ms=None, params={},
                  child=ChildIR(workflow_id=workflow_id, version=version, input=input if input is not None else {},
                                wait=wait, timeout_ms=timeout_ms, on_timeout=on_timeout,
                                on_parent_cancel=on_parent_cancel,
                                compensate_workflow_id=f"wf_{compensate}" if compensate else None,
                                compensate_version=1 if compensate else None))


async def publish(store, *irs: WorkflowIR) -> None:
    for ir in irs:
        await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))


async def tree(store, run_id: str) -> list[dict]:
    return [dict(r) for r in await store.fetch("runs_tree", run_id=run_id, project=PROJECT)]


async def output(store, run_id: str, step: str):
    for a in await store.list_attempts(run_id):
        if a["step_id"] == step and a["kind"] == "action" and a["status"] == "succeeded":
            return store.load_result(a)
    return None
