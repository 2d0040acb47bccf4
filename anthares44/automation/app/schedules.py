"""Schedules as the console shows them: each published schedule trigger of the project with its next firings
(computed as `schedule preview` and the scheduler compute them, DST shifts marked) and its latest occurrences
(started, skipped for overlap, queued, expired)."""

from __future__ import annotations

from ..compiler.ir import TriggerIR
from ..runtime.scheduling import firings_after, list_occurrences

NEXT_FIRINGS = 10
RECENT = 20


async def schedules_overview(auto, *, next_firings: int = NEXT_FIRINGS, recent: int = RECENT) -> list[dict]:
    now = auto.store.clock.now()
    occurrences = await list_occurrences(auto.store, auto.project)
    out = []
    for row in await auto.store.fetch("schedule_triggers_active"):
        if row["project_id"] != auto.project:
            continue
        trig = TriggerIR.model_validate(row["ir"])
        try:
            upcoming = [f.to_dict() for f in firings_after(trig.cron, trig.tz, trig.dst_policy, now,
                                                          limit=next_firings)]
            problem = None
        except ValueError as exc:
            upcoming, problem = [], str(exc)
        mine = [o for o in occurrences if o["trigger_id"] == row["trigger_id"]]
        out.append({"trigger_id": row["trigger_id"], "workflow_id": row["workflow_id"], "cron": trig.cron,
                    "tz": trig.tz, "dst_policy": trig.dst_policy, "overlap": trig.overlap, "next": upcoming,
                    "problem": problem, "recent": list(reversed(mine[-recent:]))})
    return out
