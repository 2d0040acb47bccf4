"""Shared pieces of the approval tests: an approval node, a workflow gated by one, groups in the store, a run with
its initiator, and the rows to assert on (the wait, the audit)."""

from __future__ import annotations

from anthares44.automation.compiler.ir import ApprovalIR, NodeIR, RetryIR, to_json
from tests.runtime.engine_support import PROJECT, node, workflow

HOUR_MS = 3_600_000


def approval_node(id: str = "sign-off", *, groups=("finance-leads",), min: int = 1, timeout_ms: int = 72 * HOUR_MS,
                  remind_ms=(), escalate_after_ms=None, escalate_groups=(), on_timeout: str = "reject",
                  notify: str | None = None, allow_self: bool = False) -> NodeIR:
    return NodeIR(id=id, index=0, kind="approval", connector=None, timeout_ms=None,
                  retry=RetryIR(max=0, strategy="none", base_ms=1000, cap_ms=1000), compensate=None, condition=None,
                  exclusive=False, sleep_ms=None, params={},
                  approval=ApprovalIR(groups=tuple(groups), min=min, timeout_ms=timeout_ms,
                                      remind_ms=tuple(remind_ms), escalate_after_ms=escalate_after_ms,
                                      escalate_groups=tuple(escalate_groups), on_timeout=on_timeout, notify=notify,
                                      allow_self=allow_self))


def gated(name: str = "t", **kw):
    return workflow([node("a"), approval_node(**kw), node("b")], name=name)


async def groups(store, project: str = PROJECT, **members: list[str]) -> None:
    for name, people in members.items():
        await store.fetchval("approver_groups_store", project=project, name=name.replace("_", "-"),
                             members=list(people), now=store.clock.now())


async def start(store, ir, *, initiator: str | None = "local:ops", key: str = "k1", project: str = PROJECT) -> str:
    await store.publish_version(project, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    created = await store.create_run(project, ir.workflow_id, {}, key, initiator=initiator)
    return created.run_id


async def wait_row(store, run_id: str) -> dict:
    [w] = [dict(r) for r in await store.fetch("run_waits_of_run", run_id=run_id)]
    return w


async def audit(store, run_id: str, step: str = "sign-off", epoch: int = 0) -> list[dict]:
    return [dict(r) for r in await store.fetch("approval_decisions_of", run_id=run_id, epoch=epoch, step_id=step)]


async def output(store, run_id: str, step: str = "sign-off"):
    for a in await store.list_attempts(run_id):
        if a["step_id"] == step and a["status"] == "succeeded":
            return store.load_result(a)
    return None
