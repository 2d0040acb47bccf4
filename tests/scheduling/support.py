"""Helpers for scheduler tests: schedule triggers as rows of automation.triggers (migration 0003's shape, as
publishing writes them), a published workflow to start, and runs that end."""

from __future__ import annotations

import json
from datetime import datetime

from anthares44.automation.compiler.ir import CatchUpIR, TriggerIR

WF = "wf_nightly"
PROJECT = "pj_default"


def schedule_ir(trigger_id: str, cron: str, tz: str = "UTC", *, dst_policy: str = "skip-nonexistent",
                overlap: str = "skip", catch_up: dict | None = None, input: dict | None = None) -> TriggerIR:
    return TriggerIR(id=trigger_id, type="schedule", workflow_id=WF, cron=cron, tz=tz, dst_policy=dst_policy,
                     overlap=overlap, catch_up=CatchUpIR(**catch_up) if catch_up else None, input=input)


async def publish_workflow(store) -> None:
    await store.publish_version(PROJECT, WF, 1, "0" * 64, {"workflow_id": WF})


async def add_trigger(store, ir: TriggerIR, published_at: datetime, *, active: bool = True) -> None:
    async with store.connection("test_add_trigger") as conn, conn.transaction():
        await conn.execute(
            "insert into automation.triggers (project_id, trigger_id, type, workflow_id, ir, origin, active, "
            "published_at, updated_at) values ($1, $2, 'schedule', $3, $4::jsonb, 'standalone', $5, $6, $6)",
            PROJECT, ir.id, ir.workflow_id, json.dumps(ir.model_dump(mode="json")), active, published_at)


async def finish_runs(store, trigger_id: str, state: str = "succeeded") -> int:
    async with store.connection("test_finish") as conn, conn.transaction():
        res = await conn.execute(
            "update automation.runs set state = $2, next_wake_at = null, lease_owner = null, lease_deadline = null "
            "where trigger_id = $1 and state not in ('succeeded', 'failed', 'compensation_failed', 'cancelled')",
            trigger_id, state)
    return int(res.split()[-1])


async def runs_of(store, trigger_id: str) -> list[dict]:
    async with store.connection("test_runs") as conn:
        return [dict(r) for r in await conn.fetch(
            "select run_id, idempotency_key, input, state, trigger_id from automation.runs where trigger_id = $1 "
            "order by idempotency_key", trigger_id)]


async def occurrences(store, trigger_id: str) -> list[tuple[str, str]]:
    from anthares44.automation.runtime.scheduling import list_occurrences

    return [(r["occurrence_key"], r["status"]) for r in await list_occurrences(store, PROJECT, trigger_id)]
