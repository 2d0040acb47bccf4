"""Schedules: the firings of the schedule triggers of files over a window before they are published (`schedule
preview` and `POST /v1/automation/schedules/preview`, one computation), what the scheduler recorded (`schedule
occurrences`), and as the console shows them: each published schedule trigger of the project with its next firings
(computed as `schedule preview` and the scheduler compute them, DST shifts marked) and its latest occurrences
(started, skipped for overlap, queued, expired)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..compiler.ir import TriggerIR
from ..errors import E_INVALID_ARGUMENT, E_TRIGGER_NOT_FOUND, A44Error
from ..runtime.scheduling import firings_after, list_occurrences

if TYPE_CHECKING:
    from ..compiler.lint import LintResult

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
        # the lowering always sets these three on a schedule trigger (compiler/lower.py)
        assert trig.cron is not None and trig.tz is not None and trig.dst_policy is not None
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


@dataclass(frozen=True)
class Preview:
    """The firings of `schedule preview`: `lint` (compiler.lint.LintResult) has errors, or `previews` holds a
    preview per trigger."""
    lint: LintResult
    previews: list

    @property
    def ok(self) -> bool:
        from ..diagnostics import has_errors

        return not has_errors(self.lint.diagnostics)

    def to_dict(self) -> dict:
        """{ok, triggers, diagnostics}: the REST answer; `triggers` is what `--format json` prints."""
        return {"ok": self.ok, "triggers": [p.to_dict() for p in self.previews],
                "diagnostics": [d.to_dict() for d in self.lint.diagnostics]}

    def text(self) -> str:
        from ..runtime.scheduling.preview import render_text

        return render_text(self.previews)


def preview_schedules(paths: list[str], trigger: str | None, start: str, end: str, *,
                      where: str = "the files") -> Preview:
    """The firings of the schedule triggers found under `paths` (or only `trigger`) over [start, end), computed as
    the scheduler does; with compile errors no previews. `where` names `paths` in E_TRIGGER_NOT_FOUND. Nothing is
    stored."""
    from ..compiler.lint import lint_paths
    from ..runtime.scheduling.occurrences import ScheduleError
    from ..runtime.scheduling.preview import preview, schedule_triggers

    result = lint_paths(paths, lower=True)
    empty = Preview(result, [])
    if not empty.ok:
        return empty
    found = [t for t in schedule_triggers(result.irs) if trigger is None or t.id == trigger]
    if not found:
        raise A44Error(E_TRIGGER_NOT_FOUND, f"no schedule trigger {trigger!r} in {where}" if trigger
                       else f"no schedule trigger in {where}")
    try:
        return Preview(result, [preview(t, start, end) for t in found])
    except (ScheduleError, ValueError) as exc:
        raise A44Error(E_INVALID_ARGUMENT, str(exc)) from None


async def occurrences(store, project: str, trigger: str | None = None, limit: int = 200) -> list[dict]:
    """What the scheduler recorded for the project's schedule triggers (or `trigger`'s), at most `limit` rows."""
    return await list_occurrences(store, project, trigger, limit)
